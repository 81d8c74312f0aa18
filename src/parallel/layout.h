#pragma once
// ParallelLayout: how the ranks of one job split a model — `pp` pipeline
// stages of `tp` tensor-parallel ranks each. Rank r is in stage r / tp at
// tensor-parallel rank r % tp; a stage's rank t hands its hidden states to
// the next stage's rank t. Rank 0 (stage 0) drives the job; the last stage's
// rank 0 returns the logits to it.
namespace rinfer {

struct ParallelLayout {
  int tp = 1;
  int pp = 1;
  int rank = 0;
  int world() const { return tp * pp; }
  int stage() const { return rank / tp; }
  int tp_rank() const { return rank % tp; }
  bool first_stage() const { return stage() == 0; }
  bool last_stage() const { return stage() == pp - 1; }
  int prev_rank() const { return rank - tp; }  // the previous stage's peer (not on the first stage)
  int next_rank() const { return rank + tp; }  // the next stage's peer (not on the last stage)
  int logits_rank() const { return (pp - 1) * tp; }  // the last stage's rank 0, which sends the logits to rank 0
};

}  // namespace rinfer

#pragma once
// ParallelLayout: how the ranks of one job split a model — `pp` pipeline
// stages of `tp` tensor-parallel ranks each, each of those `ep`
// expert-parallel ranks (which hold different MoE experts and the rest of
// the model alike). Rank r is in stage r / (tp ep), at tensor-parallel rank
// (r / ep) % tp and expert-parallel rank r % ep; a stage's rank hands its
// hidden states to the same rank of the next stage. Rank 0 (stage 0) drives
// the job; the last stage's first rank returns the logits to it.
namespace rinfer {

struct ParallelLayout {
  int tp = 1;
  int pp = 1;
  int rank = 0;
  int ep = 1;
  int world() const { return tp * pp * ep; }
  int stage_size() const { return tp * ep; }
  int stage() const { return rank / stage_size(); }
  int tp_rank() const { return (rank / ep) % tp; }
  int ep_rank() const { return rank % ep; }
  bool first_stage() const { return stage() == 0; }
  bool last_stage() const { return stage() == pp - 1; }
  bool stage_leader() const { return rank % stage_size() == 0; }
  int prev_rank() const { return rank - stage_size(); }  // the previous stage's peer (not on the first stage)
  int next_rank() const { return rank + stage_size(); }  // the next stage's peer (not on the last stage)
  int logits_rank() const { return (pp - 1) * stage_size(); }  // the last stage's first rank, which sends the logits
};

}  // namespace rinfer

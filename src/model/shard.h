#pragma once
// Shard: which part of a model this instance holds — rank `rank` of `world`
// ranks that split its layers tensor-parallel, in pipeline stage `stage` of
// `stages`, which holds the decoder layers `layers`. Layers load their part
// from it; who started the ranks (mpirun, a test's threads) is not their
// business.
#include <cstdint>
#include <memory>

#include "parallel/expert_placement.h"

namespace rinfer {

// [begin, end) of some items.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

struct Shard {
  Shard() = default;
  Shard(int tp_rank, int tp_world, int stage_index = 0, int stage_count = 1)
      : rank(tp_rank), world(tp_world), stage(stage_index), stages(stage_count) {}
  int rank = 0;   // tensor-parallel rank within the stage
  int world = 1;  // tensor-parallel ranks of the stage
  int stage = 0;
  int stages = 1;
  Range layers;  // this stage's decoder layers (ignored when stages == 1: all of them)
  // Expert parallelism: this rank of ep_world holds the MoE experts `experts`
  // places on it (the rest of the model whole, replicated).
  int ep_rank = 0;
  int ep_world = 1;
  std::shared_ptr<const ExpertPlan> experts;
  bool whole() const { return world == 1; }  // no tensor-parallel split
  bool first_stage() const { return stage == 0; }  // embeds the tokens
  bool last_stage() const { return stage == stages - 1; }  // computes the logits
  Range stage_layers(int64_t n_layers) const { return stages == 1 ? Range{0, n_layers} : layers; }
};

// [begin, end) of `n` items for `shard`, cut on multiples of `align` (the
// last part takes the remainder); n need not divide evenly.
Range shard_range(int64_t n, const Shard& shard, int64_t align);

}  // namespace rinfer

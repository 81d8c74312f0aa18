#pragma once
// Expert placement for expert parallelism: which rank holds which experts
// of a mixture-of-experts layer, planned from measured loads (tokens routed
// to each expert, `rinfer run --expert-stats`), and how a token picks among
// an expert's replicas. Deterministic, so that every rank computes the same
// plan and the same routing without exchanging a message.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rinfer {

struct PlacementOptions {
  int ranks = 1;
  int redundant = 0;  // extra physical experts (replicas) per layer, over all ranks
  // Node-limited routing (DeepSeek-V3's groups): with n_group > 1 and
  // group_limited, the experts of one group (n_experts / n_group
  // consecutive ids) and their replicas stay on one set of ranks; the
  // groups are spread over min(n_group, ranks) equal sets.
  int n_group = 1;
  bool group_limited = false;
};

struct LayerPlacement {
  int64_t layer = 0;
  // Per rank, the logical expert of each of its physical slots (the same
  // number of slots on every rank).
  std::vector<std::vector<int32_t>> rank_experts;
  std::vector<int32_t> replicas;    // per logical expert: how many ranks hold it
  std::vector<double> rank_load;    // per rank: the predicted tokens (each replica takes load / replicas)
  double balancedness() const;      // mean / max of rank_load (1: perfectly even)
};

// One layer: replicas first (each redundant slot goes to the expert with
// the heaviest load per replica, ties to the lower id), then the physical
// experts packed heaviest first onto the rank with the least load that has
// a free slot and no replica of the same expert yet (ties to the lower
// rank). One-line errors when (experts + redundant) does not fill the
// ranks' slots evenly or the groups do not fit the ranks.
LayerPlacement plan_layer(const std::vector<double>& loads, const PlacementOptions& o, int64_t layer = 0);
// Experts [r E / ranks, (r + 1) E / ranks) on rank r, no replicas: the
// placement without a plan, for comparison.
LayerPlacement contiguous_layer(const std::vector<double>& loads, int ranks, int64_t layer = 0);

// Where every MoE layer's experts live over `ranks` expert-parallel ranks:
// a placement file (rinfer plan-experts), or experts in contiguous ranges.
struct ExpertPlan {
  std::string source;  // the file, or "" for a placement without one
  int ranks = 1;
  // Without a file: this many replicas per layer, planned from even loads
  // (0: experts in contiguous ranges).
  int redundant = 0;
  std::map<int64_t, LayerPlacement> layers;  // from the file
  // A placement file; one-line errors for what is not one, or not for `ranks`.
  static ExpertPlan load(const std::string& path, int ranks);
  // Layer `layer`'s placement of its `n_experts` experts; one-line errors
  // when the file has no such layer or another expert count.
  LayerPlacement layer(int64_t layer, int64_t n_experts) const;
};

// The load each rank of `p` carries when the experts see `loads` (each
// replica takes load / replicas, as ReplicaRouter spreads it), and the
// balancedness (mean / max) that gives.
std::vector<double> rank_loads(const LayerPlacement& p, const std::vector<double>& loads);
double balancedness(const std::vector<double>& rank_load);

// Load-aware routing over replicas, within one step: a token for an expert
// with several replicas goes to the replica whose rank has the fewest
// tokens assigned so far in the step (ties to the lower rank).
class ReplicaRouter {
 public:
  explicit ReplicaRouter(const LayerPlacement& p);
  void begin_step();  // every rank's count back to 0
  // The rank that computes this token's `expert`; counts the token there.
  int route(int32_t expert);
  const std::vector<int64_t>& rank_tokens() const { return tokens_; }

 private:
  std::vector<std::vector<int>> holders_;  // per logical expert: its ranks, ascending
  std::vector<int64_t> tokens_;
};

}  // namespace rinfer

#pragma once
// Mixture-of-experts feed-forward: a router scores the experts per token,
// the top-k are chosen (optionally within the best expert groups, with a
// selection-only bias), their weights normalized and/or scaled, and each
// expert runs once on all the tokens routed to it (grouped, not a per-token
// loop). Shared experts run on every token, optionally behind a sigmoid gate.
// Covers Mixtral, Qwen2-MoE, DeepSeek-MoE and DeepSeek-V2/V3 routing.
//
// Tensor parallelism shards every expert, not the set of experts: each rank
// holds all experts' (and the shared experts') gate/up rows for its part of
// the intermediate width and down's matching columns (Megatron style), while
// the router is replicated, so every rank routes every token alike and does
// the same share of the work whatever the routing. The experts' down
// products stay partial sums, weighted and added up locally, and the block
// reduces its output once (one all-reduce per layer, not one per expert).
// Whole experts per rank (expert parallelism) is a separate feature (--ep).
#include <memory>
#include <vector>

#include "model/feed_forward.h"
#include "parallel/expert_placement.h"

namespace rinfer {

struct MoeRouting {
  int64_t n_experts = 0;
  int64_t top_k = 0;
  bool sigmoid = false;          // scores = sigmoid(logits) (DeepSeek-V3), else softmax over all experts
  bool norm_topk_prob = false;   // divide the chosen weights by their sum
  float routed_scaling = 1.0f;   // multiply the chosen weights
  bool scale_only_unnormalized = false;  // DeepSeek-V2: the factor applies only when not normalizing
  int64_t n_group = 1;           // group-limited routing: keep the topk_group best of n_group groups
  int64_t topk_group = 1;
  bool group_score_top2_sum = false;  // group score = sum of its 2 best (V3), else its max (V2)
};

// Which experts token scores pick and with what weights (exposed for tests).
// logits: n_experts router outputs; bias: selection-only correction or null.
void route_token(const MoeRouting& r, const float* logits, const float* bias, int32_t* experts, float* weights,
                 float* scratch /* 2 * n_experts */);

// Expert parallelism: a rank holds whole experts (a layer's placement,
// parallel/expert_placement.h). Every rank routes every token the same way
// and sends each (token, expert) to the same replica (ReplicaRouter); a rank
// computes the pairs that land on it, rank 0 the shared expert, and the
// weighted sums meet in one all-reduce over the expert-parallel ranks (the
// hidden states are on every rank, so no token has to travel).
class ExpertParallel {
 public:
  ExpertParallel(int rank, const LayerPlacement& placement);
  int rank() const { return rank_; }
  bool holds(int32_t expert) const;
  ReplicaRouter& router() { return router_; }

 private:
  int rank_;
  std::vector<uint8_t> held_;
  ReplicaRouter router_;
};

class MoeFeedForward : public FeedForwardBlock {
 public:
  // experts: all n_experts, those of other expert-parallel ranks empty (ep).
  MoeFeedForward(MoeRouting routing, Linear router, const float* correction_bias, std::vector<GatedMLP> experts,
                 std::unique_ptr<GatedMLP> shared, Linear shared_gate, std::unique_ptr<ExpertParallel> ep = nullptr);
  void forward(const float* h, int64_t n_tokens, float* out, const ForwardContext& ctx) override;
  uint64_t weight_bytes_per_token() const override;
  // Tokens routed to each expert since creation (for --expert-stats).
  const std::vector<uint64_t>& expert_counts() const { return counts_total_; }
  // Expert parallelism: (token, expert) pairs each rank computed since
  // creation (every rank routes alike, so every rank knows all of them);
  // empty without.
  const std::vector<uint64_t>& rank_tokens() const { return rank_tokens_total_; }

 private:
  MoeRouting r_;
  Linear router_;
  const float* bias_;
  std::vector<GatedMLP> experts_;
  std::unique_ptr<GatedMLP> shared_;
  Linear shared_gate_;  // out == 1, or empty
  bool reduces_ = false;  // the experts are row-parallel shards: forward() reduces their sum once
  std::unique_ptr<ExpertParallel> ep_;
  std::vector<int32_t> sel_;
  std::vector<float> sel_w_;
  std::vector<std::vector<std::pair<int32_t, float>>> by_expert_;
  std::vector<uint64_t> counts_total_;
  std::vector<uint64_t> rank_tokens_total_;
};

}  // namespace rinfer

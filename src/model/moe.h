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
// Whole experts per rank is expert parallelism (--ep, below).
#include <functional>
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
// parallel/expert_placement.h), or with tensor parallelism too its share of
// each of them. Every rank routes every token the same way and sends each
// (token, expert) pair to the same replica (ReplicaRouter); a rank computes
// the pairs that land on it, rank 0 the shared expert, and the outputs are
// gathered on every rank (the hidden states are on every rank, so no token
// has to travel out) and summed there in the order one process sums them:
// without replicas (and without tensor parallelism, whose partial sums are
// reduced per expert) the result is that of one process to the bit,
// whatever the placement and the number of ranks.
class ExpertParallel {
 public:
  ExpertParallel(int rank, const LayerPlacement& placement);
  int rank() const { return rank_; }
  int ranks() const { return int(placement_.rank_experts.size()); }
  bool holds(int32_t expert) const;
  const LayerPlacement& placement() const { return placement_; }
  ReplicaRouter& router() { return router_; }

 private:
  int rank_;
  LayerPlacement placement_;
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
  int64_t n_experts() const { return r_.n_experts; }
  // Tokens routed to each expert since creation (for --expert-stats).
  const std::vector<uint64_t>& expert_counts() const { return counts_total_; }
  // Expert parallelism: (token, expert) pairs each rank computed since
  // creation (every rank routes alike, so every rank knows all of them);
  // empty without.
  const std::vector<uint64_t>& rank_tokens() const { return rank_tokens_total_; }

  // Expert parallelism: how an expert this rank does not hold is read (from
  // the model's weights) and how one it gives up hands its memory back.
  using ExpertLoader = std::function<GatedMLP(int32_t expert)>;
  using ExpertRelease = std::function<void(int32_t expert)>;
  void set_expert_source(ExpertLoader load, ExpertRelease release);
  // Expert parallelism: moves to another placement of the same experts and
  // ranks between two forward passes — reads the experts it gains, drops
  // those it loses. Every rank must move alike (the plan is computed from
  // loads every rank counted the same).
  void place(const LayerPlacement& placement);
  const LayerPlacement* placement() const { return ep_ ? &ep_->placement() : nullptr; }

 private:
  MoeRouting r_;
  Linear router_;
  const float* bias_;
  std::vector<GatedMLP> experts_;
  std::unique_ptr<GatedMLP> shared_;
  Linear shared_gate_;  // out == 1, or empty
  bool reduces_ = false;  // the experts are row-parallel shards: their outputs are partial sums
  std::unique_ptr<ExpertParallel> ep_;
  ExpertLoader load_expert_;
  ExpertRelease release_expert_;
  std::vector<int32_t> sel_;
  std::vector<float> sel_w_;
  std::vector<std::vector<int32_t>> by_expert_;  // per expert: its (token, expert) pairs t * top_k + k, ascending
  std::vector<int32_t> owner_, slot_;            // expert parallelism, per pair: the rank computing it, its row there
  std::vector<int64_t> rank_rows_, rank_first_;  // expert parallelism: each rank's rows, then floats; its first row
  std::vector<uint64_t> counts_total_;
  std::vector<uint64_t> rank_tokens_total_;
  void forward_expert_parallel(const float* h, int64_t T, float* out, const ForwardContext& ctx);
  void add_shared(const float* h, int64_t T, const float* shared_out, float* out, const ForwardContext& ctx);
};

}  // namespace rinfer

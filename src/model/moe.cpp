#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/stage_profile.h"

namespace rinfer {

void route_token(const MoeRouting& r, const float* logits, const float* bias, int32_t* experts, float* weights,
                 float* scratch) {
  const int64_t E = r.n_experts;
  float* scores = scratch;          // what the weights come from
  float* choice = scratch + E;      // what the selection uses
  if (r.sigmoid) {
    for (int64_t e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  } else {
    std::memcpy(scores, logits, size_t(E) * sizeof(float));
    ops::softmax(scores, E);
  }
  for (int64_t e = 0; e < E; ++e) choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
  if (r.n_group > 1 && r.topk_group < r.n_group) {
    // Keep only the experts of the topk_group best groups.
    const int64_t per = E / r.n_group;
    std::vector<std::pair<float, int64_t>> groups(size_t(r.n_group));
    for (int64_t g = 0; g < r.n_group; ++g) {
      const float* c = choice + g * per;
      float best = -INFINITY, second = -INFINITY;
      for (int64_t i = 0; i < per; ++i) {
        if (c[i] > best) {
          second = best;
          best = c[i];
        } else if (c[i] > second) {
          second = c[i];
        }
      }
      groups[size_t(g)] = {r.group_score_top2_sum ? best + second : best, g};
    }
    std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    // HF masks the dropped groups with 0.0 (masked_fill), not -inf; copy that.
    for (int64_t k = r.topk_group; k < r.n_group; ++k) {
      float* c = choice + groups[size_t(k)].second * per;
      for (int64_t i = 0; i < per; ++i) c[i] = 0.0f;
    }
  }
  // top-k by selection score; ties go to the lower expert id.
  for (int64_t k = 0; k < r.top_k; ++k) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = false;
      for (int64_t j = 0; j < k; ++j) taken |= experts[j] == e;
      if (taken) continue;
      if (best < 0 || choice[e] > choice[best]) best = e;
    }
    experts[k] = int32_t(best);
    weights[k] = scores[best];
  }
  if (r.norm_topk_prob) {
    double sum = 0;
    for (int64_t k = 0; k < r.top_k; ++k) sum += weights[k];
    const float inv = float(1.0 / (sum + 1e-20));
    for (int64_t k = 0; k < r.top_k; ++k) weights[k] *= inv;
  }
  if (!(r.scale_only_unnormalized && r.norm_topk_prob))
    for (int64_t k = 0; k < r.top_k; ++k) weights[k] *= r.routed_scaling;
}

ExpertParallel::ExpertParallel(int rank, const LayerPlacement& placement)
    : rank_(rank), held_(placement.replicas.size(), 0), router_(placement) {
  RINFER_CHECK(rank >= 0 && size_t(rank) < placement.rank_experts.size(), "expert-parallel rank ", rank, " of ",
               placement.rank_experts.size());
  for (int32_t e : placement.rank_experts[size_t(rank)]) held_[size_t(e)] = 1;
}

bool ExpertParallel::holds(int32_t expert) const { return held_[size_t(expert)] != 0; }

MoeFeedForward::MoeFeedForward(MoeRouting routing, Linear router, const float* correction_bias,
                               std::vector<GatedMLP> experts, std::unique_ptr<GatedMLP> shared, Linear shared_gate,
                               std::unique_ptr<ExpertParallel> ep)
    : r_(routing), router_(router), bias_(correction_bias), experts_(std::move(experts)), shared_(std::move(shared)),
      shared_gate_(shared_gate), ep_(std::move(ep)), by_expert_(size_t(routing.n_experts)),
      counts_total_(size_t(routing.n_experts), 0) {
  RINFER_CHECK(r_.n_experts > 0 && r_.top_k > 0 && r_.top_k <= r_.n_experts, "MoE: top_k ", r_.top_k,
               " must be in [1, n_experts = ", r_.n_experts, "]");
  RINFER_CHECK(int64_t(experts_.size()) == r_.n_experts, "MoE: expected ", r_.n_experts, " experts");
  RINFER_CHECK(r_.n_group >= 1 && r_.n_experts % r_.n_group == 0 && r_.topk_group >= 1 && r_.topk_group <= r_.n_group,
               "MoE: n_group ", r_.n_group, " must divide n_routed_experts ", r_.n_experts,
               " and topk_group must be in [1, n_group]");
  if (ep_) {
    RINFER_CHECK(int64_t(ep_->router().rank_tokens().size()) > 1, "MoE: expert parallelism over one rank");
    rank_tokens_total_.assign(ep_->router().rank_tokens().size(), 0);
    return;  // whole experts; forward() reduces over the expert-parallel ranks
  }
  reduces_ = experts_[0].reduces();
  for (const GatedMLP& e : experts_)
    RINFER_CHECK(e.reduces() == reduces_, "MoE: the experts are not all sharded alike");
  RINFER_CHECK(!shared_ || shared_->reduces() == reduces_, "MoE: the shared expert is not sharded as the experts");
}

uint64_t MoeFeedForward::weight_bytes_per_token() const {
  // An expert this rank holds (with expert parallelism, not every one is).
  size_t held = 0;
  while (held + 1 < experts_.size() && experts_[held].weight_bytes_per_token() == 0) ++held;
  uint64_t n = router_.bytes() + uint64_t(r_.top_k) * experts_[held].weight_bytes_per_token();
  if (shared_) n += shared_->weight_bytes_per_token() + shared_gate_.bytes();
  return n;
}

void MoeFeedForward::forward(const float* h, int64_t T, float* out, const ForwardContext& ctx) {
  const int64_t E = r_.n_experts, K = r_.top_k, H = router_.in();
  Workspace& ws = *ctx.ws;
  float* logits = ws.get(Workspace::kRouter, size_t(T * E + 2 * E));
  float* scratch = logits + T * E;
  {
    profile::Scope s(profile::Stage::Router, [&] { return router_.bytes(); });
    router_.forward(ctx, h, T, logits);
    sel_.resize(size_t(T * K));
    sel_w_.resize(size_t(T * K));
    for (auto& v : by_expert_) v.clear();
    if (ep_) ep_->router().begin_step();
    for (int64_t t = 0; t < T; ++t) {
      route_token(r_, logits + t * E, bias_, sel_.data() + t * K, sel_w_.data() + t * K, scratch);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t e = sel_[t * K + k];
        ++counts_total_[size_t(e)];
        // Every rank picks the same replica; this one keeps the pairs it computes.
        if (ep_ && ep_->router().route(e) != ep_->rank()) continue;
        by_expert_[size_t(e)].push_back({int32_t(t), sel_w_[t * K + k]});
      }
    }
    if (ep_)
      for (size_t r = 0; r < rank_tokens_total_.size(); ++r)
        rank_tokens_total_[r] += uint64_t(ep_->router().rank_tokens()[r]);
  }
  std::memset(out, 0, size_t(T * H) * sizeof(float));
  float* xin = ws.get(Workspace::kExpertIn, size_t(T * H));
  float* xout = ws.get(Workspace::kExpertOut, size_t(T * H));
  // Each expert runs once over all of its tokens: a batch of rows, so prefill
  // and many-sequence decode get matrix-matrix work per expert.
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = by_expert_[size_t(e)];
    if (rows.empty()) continue;
    const int64_t n = int64_t(rows.size());
    {
      profile::Scope s(profile::Stage::MoeCombine);
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(xin + i * H, h + int64_t(rows[i].first) * H, size_t(H) * sizeof(float));
    }
    experts_[size_t(e)].forward_partial(xin, n, xout, ctx);
    profile::Scope s(profile::Stage::MoeCombine);
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + int64_t(rows[i].first) * H;
      const float wgt = rows[i].second;
      const float* y = xout + i * H;
      for (int64_t d = 0; d < H; ++d) o[d] += wgt * y[d];
    }
  }
  if (shared_ && (!ep_ || ep_->rank() == 0)) {  // one rank adds the shared expert
    float* s = ws.get(Workspace::kShared, size_t(T * H));
    shared_->forward_partial(h, T, s, ctx);
    profile::Scope combine_scope(profile::Stage::MoeCombine, [&] { return shared_gate_.bytes(); });
    if (!shared_gate_.empty()) {
      // The gate is replicated and a per-token scalar: it scales each
      // rank's partial sum as it would the whole.
      float* g = ws.get(Workspace::kMla0, size_t(T));
      shared_gate_.forward(ctx, h, T, g);
      for (int64_t t = 0; t < T; ++t) {
        const float gate = 1.0f / (1.0f + std::exp(-g[t]));
        for (int64_t d = 0; d < H; ++d) out[t * H + d] += gate * s[t * H + d];
      }
    } else {
      ops::add_inplace(out, s, T * H);
    }
  }
  if (reduces_ || ep_) {
    profile::Scope s(profile::Stage::MoeCombine);
    profile::CommScope comm(uint64_t(T * H) * sizeof(float));
    Communicator* c = ep_ ? ctx.expert_comm : ctx.comm;
    RINFER_CHECK(c && c->world() == int(ep_ ? ep_->router().rank_tokens().size() : c->world()),
                 "MoE: expert parallelism over ", ep_ ? ep_->router().rank_tokens().size() : 0,
                 " ranks without their communicator");
    c->all_reduce_sum(out, T * H);
  }
}

}  // namespace rinfer

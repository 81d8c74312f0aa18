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
    : rank_(rank), placement_(placement), held_(placement.replicas.size(), 0), router_(placement) {
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
  const GatedMLP* any = nullptr;  // an expert this rank holds
  for (const GatedMLP& e : experts_) {
    if (e.weight_bytes_per_token() == 0) continue;
    if (!any) any = &e;
    RINFER_CHECK(e.reduces() == any->reduces(), "MoE: the experts are not all sharded alike");
  }
  RINFER_CHECK(any, "MoE: this rank holds no expert");
  reduces_ = any->reduces();
  RINFER_CHECK(!shared_ || shared_->reduces() == reduces_, "MoE: the shared expert is not sharded as the experts");
  if (ep_) {
    RINFER_CHECK(ep_->ranks() > 1, "MoE: expert parallelism over one rank");
    RINFER_CHECK(int64_t(ep_->placement().replicas.size()) == r_.n_experts, "MoE: a placement of ",
                 ep_->placement().replicas.size(), " experts for a layer of ", r_.n_experts);
    rank_tokens_total_.assign(size_t(ep_->ranks()), 0);
  }
}

uint64_t MoeFeedForward::weight_bytes_per_token() const {
  // An expert this rank holds (with expert parallelism, not every one is).
  size_t held = 0;
  while (held + 1 < experts_.size() && experts_[held].weight_bytes_per_token() == 0) ++held;
  uint64_t n = router_.bytes() + uint64_t(r_.top_k) * experts_[held].weight_bytes_per_token();
  if (shared_) n += shared_->weight_bytes_per_token() + shared_gate_.bytes();
  return n;
}

void MoeFeedForward::set_expert_source(ExpertLoader load, ExpertRelease release) {
  load_expert_ = std::move(load);
  release_expert_ = std::move(release);
}

void MoeFeedForward::place(const LayerPlacement& placement) {
  RINFER_CHECK(ep_, "MoE: a new expert placement without expert parallelism");
  RINFER_CHECK(load_expert_, "MoE: experts cannot be moved: no source to read them from");
  RINFER_CHECK(int(placement.rank_experts.size()) == ep_->ranks() &&
                   int64_t(placement.replicas.size()) == r_.n_experts,
               "MoE: a placement of ", placement.replicas.size(), " experts over ", placement.rank_experts.size(),
               " ranks for a layer of ", r_.n_experts, " experts over ", ep_->ranks());
  auto next = std::make_unique<ExpertParallel>(ep_->rank(), placement);
  for (int32_t e = 0; e < int32_t(r_.n_experts); ++e) {
    if (next->holds(e) && !ep_->holds(e)) {
      experts_[size_t(e)] = load_expert_(e);
    } else if (!next->holds(e) && ep_->holds(e)) {
      experts_[size_t(e)] = GatedMLP();
      if (release_expert_) release_expert_(e);
    }
  }
  ep_ = std::move(next);
}

namespace {

// out += weight * y: the one way an expert's output is added, so that one
// process and the expert-parallel ranks round alike.
void accumulate(float* out, float weight, const float* y, int64_t n) {
  for (int64_t d = 0; d < n; ++d) out[d] += weight * y[d];
}

}  // namespace

void MoeFeedForward::add_shared(const float* h, int64_t T, const float* s, float* out, const ForwardContext& ctx) {
  const int64_t H = router_.in();
  profile::Scope combine_scope(profile::Stage::MoeCombine, [&] { return shared_gate_.bytes(); });
  if (!shared_gate_.empty()) {
    // The gate is replicated and a per-token scalar: it scales each
    // rank's partial sum as it would the whole.
    float* g = ctx.ws->get(Workspace::kMla0, size_t(T));
    shared_gate_.forward(ctx, h, T, g);
    for (int64_t t = 0; t < T; ++t) {
      const float gate = 1.0f / (1.0f + std::exp(-g[t]));
      for (int64_t d = 0; d < H; ++d) out[t * H + d] += gate * s[t * H + d];
    }
  } else {
    ops::add_inplace(out, s, T * H);
  }
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
    if (ep_) {
      ep_->router().begin_step();
      owner_.resize(size_t(T * K));
    }
    for (int64_t t = 0; t < T; ++t) {
      route_token(r_, logits + t * E, bias_, sel_.data() + t * K, sel_w_.data() + t * K, scratch);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t p = t * K + k;
        const int32_t e = sel_[size_t(p)];
        ++counts_total_[size_t(e)];
        by_expert_[size_t(e)].push_back(int32_t(p));
        // Every rank picks the same replica for the pair.
        if (ep_) owner_[size_t(p)] = ep_->router().route(e);
      }
    }
    if (ep_)
      for (size_t r = 0; r < rank_tokens_total_.size(); ++r)
        rank_tokens_total_[r] += uint64_t(ep_->router().rank_tokens()[r]);
  }
  if (ep_) return forward_expert_parallel(h, T, out, ctx);
  std::memset(out, 0, size_t(T * H) * sizeof(float));
  float* xin = ws.get(Workspace::kExpertIn, size_t(T * H));
  float* xout = ws.get(Workspace::kExpertOut, size_t(T * H));
  // Each expert runs once over all of its tokens: a batch of rows, so prefill
  // and many-sequence decode get matrix-matrix work per expert.
  for (int64_t e = 0; e < E; ++e) {
    const auto& pairs = by_expert_[size_t(e)];
    if (pairs.empty()) continue;
    const int64_t n = int64_t(pairs.size());
    {
      profile::Scope s(profile::Stage::MoeCombine);
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(xin + i * H, h + (pairs[size_t(i)] / K) * H, size_t(H) * sizeof(float));
    }
    experts_[size_t(e)].forward_partial(xin, n, xout, ctx);
    profile::Scope s(profile::Stage::MoeCombine);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t p = pairs[size_t(i)];
      accumulate(out + (p / K) * H, sel_w_[size_t(p)], xout + i * H, H);
    }
  }
  if (shared_) {
    float* s = ws.get(Workspace::kShared, size_t(T * H));
    shared_->forward_partial(h, T, s, ctx);
    add_shared(h, T, s, out, ctx);
  }
  if (reduces_) {
    profile::Scope s(profile::Stage::MoeCombine);
    profile::CommScope comm(uint64_t(T * H) * sizeof(float));
    RINFER_CHECK(ctx.comm, "MoE: row-parallel experts without their communicator");
    ctx.comm->all_reduce_sum(out, T * H);
  }
}

// Each rank's block of outputs: its pairs expert by expert (so that an
// expert's rows are contiguous and its output lands in place), then on rank
// 0 the shared expert's T rows. Every rank knows every pair's owner, so
// every rank knows where each output will sit after the gather.
void MoeFeedForward::forward_expert_parallel(const float* h, int64_t T, float* out, const ForwardContext& ctx) {
  const int64_t E = r_.n_experts, K = r_.top_k, H = router_.in();
  const int R = ep_->ranks(), me = ep_->rank();
  Workspace& ws = *ctx.ws;
  Communicator* comm = ctx.expert_comm;
  RINFER_CHECK(comm && comm->world() == R && comm->rank() == me, "MoE: expert parallelism over ", R,
               " ranks without their communicator");
  rank_rows_.assign(size_t(R), 0);
  slot_.resize(size_t(T * K));
  for (int64_t e = 0; e < E; ++e)
    for (int32_t p : by_expert_[size_t(e)]) slot_[size_t(p)] = int32_t(rank_rows_[size_t(owner_[size_t(p)])]++);
  const int64_t shared_row = rank_rows_[0];
  if (shared_) rank_rows_[0] += T;
  const int64_t mine = rank_rows_[size_t(me)];
  float* send = ws.get(Workspace::kExpertSend, size_t(std::max<int64_t>(mine, 1) * H));
  float* xin = ws.get(Workspace::kExpertIn, size_t(T * H));
  int64_t row = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (!ep_->holds(int32_t(e))) continue;
    int64_t n = 0;
    {
      profile::Scope s(profile::Stage::MoeCombine);
      for (int32_t p : by_expert_[size_t(e)])
        if (owner_[size_t(p)] == me) std::memcpy(xin + n++ * H, h + (p / K) * H, size_t(H) * sizeof(float));
    }
    if (n == 0) continue;
    experts_[size_t(e)].forward_partial(xin, n, send + row * H, ctx);
    row += n;
  }
  if (shared_ && me == 0) shared_->forward_partial(h, T, send + shared_row * H, ctx);
  std::vector<int64_t>& counts = rank_rows_;  // rows, then floats
  std::vector<int64_t>& first = rank_first_;
  first.resize(size_t(R));
  float* all = nullptr;
  {
    profile::Scope s(profile::Stage::MoeCombine);
    // With tensor parallelism too, this rank's outputs are partial sums over
    // the width; its tensor-parallel peers hold the same experts and pairs.
    if (reduces_ && mine > 0) {
      profile::CommScope comm_scope(uint64_t(mine * H) * sizeof(float));
      RINFER_CHECK(ctx.comm, "MoE: row-parallel experts without their communicator");
      ctx.comm->all_reduce_sum(send, mine * H);
    }
    int64_t total = 0;
    for (int r = 0; r < R; ++r) {
      first[size_t(r)] = total;
      total += counts[size_t(r)];
      counts[size_t(r)] *= H;
    }
    all = ws.get(Workspace::kExpertGathered, size_t(std::max<int64_t>(total, 1) * H));
    {
      profile::CommScope comm_scope(uint64_t(total * H) * sizeof(float));
      comm->all_gather_columns(send, 1, counts, all);
    }
    // Summed as one process sums them: expert by expert, then the shared expert.
    std::memset(out, 0, size_t(T * H) * sizeof(float));
    for (int64_t e = 0; e < E; ++e)
      for (int32_t p : by_expert_[size_t(e)]) {
        const float* y = all + (first[size_t(owner_[size_t(p)])] + slot_[size_t(p)]) * H;
        accumulate(out + (p / K) * H, sel_w_[size_t(p)], y, H);
      }
  }
  if (shared_) add_shared(h, T, all + (first[0] + shared_row) * H, out, ctx);
}

}  // namespace rinfer

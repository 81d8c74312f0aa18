#include "model/attention.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/stage_profile.h"

namespace rinfer {

std::vector<float> alibi_slopes(int64_t n) {
  auto pow2_slopes = [](int64_t m) {
    std::vector<double> s(static_cast<size_t>(m));
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(m)) - 3)));
    for (int64_t i = 0; i < m; ++i) s[i] = std::pow(start, double(i + 1));
    return s;
  };
  std::vector<double> s;
  const int64_t closest = int64_t(1) << int64_t(std::floor(std::log2(double(n))));
  s = pow2_slopes(closest);
  if (closest != n) {
    auto extra = pow2_slopes(2 * closest);
    for (int64_t i = 0; int64_t(s.size()) < n; i += 2) s.push_back(extra[size_t(i)]);
  }
  return std::vector<float>(s.begin(), s.end());
}

GqaAttention::GqaAttention(const GqaShape& shape, Linear q, Linear k, Linear v, Linear o,
                           std::shared_ptr<const RotaryEmbedding> rope, std::vector<float> alibi)
    : s_(shape), q_(q), k_(k), v_(v), o_(o), rope_(std::move(rope)), alibi_(std::move(alibi)),
      scale_(float(1.0 / std::sqrt(double(shape.head_dim)))) {
  const int64_t D = shape.head_dim;
  RINFER_CHECK(q_.out() % D == 0 && k_.out() % D == 0 && k_.out() == v_.out() && o_.in() == q_.out(),
               "attention: the q/k/v/o shards do not hold whole heads of ", D);
  head0_ = q_.rows().begin / D;
  n_heads_ = q_.out() / D;
  n_kv_heads_ = k_.out() / D;
  RINFER_CHECK(n_kv_heads_ > 0 && n_heads_ % n_kv_heads_ == 0 &&
                   k_.rows().begin / D == head0_ / (shape.n_heads / shape.n_kv_heads),
               "attention: this shard's query heads [", head0_, ", ", head0_ + n_heads_,
               ") do not map to its K/V heads");
}

GqaAttention GqaAttention::load(const GqaShape& s, const WeightStore& w, const std::string& p, bool qkv_bias,
                                bool o_bias, std::shared_ptr<const RotaryEmbedding> rope, std::vector<float> alibi,
                                const Shard& shard, const char* q, const char* k, const char* v, const char* o) {
  const int64_t H = s.hidden, D = s.head_dim, NH = s.n_heads, NKV = s.n_kv_heads;
  const std::string P = p;
  if (shard.whole())
    return GqaAttention(s, Linear::load(w, P + q, H, NH * D, qkv_bias), Linear::load(w, P + k, H, NKV * D, qkv_bias),
                        Linear::load(w, P + v, H, NKV * D, qkv_bias), Linear::load(w, P + o, NH * D, H, o_bias),
                        std::move(rope), std::move(alibi));
  // Heads split evenly; with fewer K/V heads than ranks each rank keeps
  // (a copy of) the one K/V head its query heads read.
  const int W = shard.world, r = shard.rank;
  RINFER_CHECK(NH % W == 0, "tensor parallelism: ", NH, " attention heads do not split over ", W, " ranks");
  RINFER_CHECK(NKV % W == 0 || W % NKV == 0, "tensor parallelism: ", NKV, " K/V heads do not split over ", W,
               " ranks (nor divide them)");
  const int64_t h0 = r * (NH / W), h1 = h0 + NH / W;
  // o_proj's columns are cut at the heads: they must end on its layout's
  // units (quantization groups, 32-column tiles).
  const int64_t unit = ops::matrix_column_unit(Linear::load(w, P + o, NH * D, H, false).matrix());
  RINFER_CHECK((NH / W * D) % unit == 0, "tensor parallelism: ", NH / W, " heads of ", D, " per rank are ",
               NH / W * D, " columns of ", P, o, ", not a multiple of its ", unit,
               "-column units (quantization groups: convert with a smaller --group-size)");
  const int64_t kv0 = NKV >= W ? r * (NKV / W) : int64_t(r) * NKV / W, kv1 = NKV >= W ? kv0 + NKV / W : kv0 + 1;
  return GqaAttention(s, Linear::load_rows(w, P + q, H, NH * D, qkv_bias, {h0 * D, h1 * D}),
                      Linear::load_rows(w, P + k, H, NKV * D, qkv_bias, {kv0 * D, kv1 * D}),
                      Linear::load_rows(w, P + v, H, NKV * D, qkv_bias, {kv0 * D, kv1 * D}),
                      Linear::load_columns(w, P + o, NH * D, H, o_bias, {h0 * D, h1 * D}, shard), std::move(rope),
                      std::move(alibi));
}

const float* token_angles(const ForwardContext& ctx, const RotaryEmbedding& rope) {
  TokenAngles fresh;
  TokenAngles& ta = ctx.angles ? *ctx.angles : fresh;
  if (ta.owner == &rope) return ta.cs;
  const int64_t R = rope.rot_dim();
  float* cs = ctx.ws->get(Workspace::kAngles, size_t(ctx.tokens.n_tokens * R));
  for_rows(ctx.exec, ctx.tokens.n_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const BatchItem& item = ctx.batch[size_t(ctx.tokens.seq[t])];
      rope.angles(ctx.tokens.pos[t], item.start_pos + int64_t(item.tokens.size()), cs + t * R);
    }
  });
  ta.owner = &rope;
  ta.cs = cs;
  return cs;
}

void GqaAttention::forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) {
  const int64_t T = ctx.tokens.n_tokens, D = s_.head_dim, NH = n_heads_, NKV = n_kv_heads_;
  Workspace& ws = *ctx.ws;
  float* q = ws.get(Workspace::kQ, size_t(T * NH * D));
  float* k = ws.get(Workspace::kK, size_t(T * NKV * D));
  float* v = ws.get(Workspace::kV, size_t(T * NKV * D));
  float* attn = ws.get(Workspace::kAttn, size_t(T * NH * D));
  {
    profile::Scope s(profile::Stage::Qkv, [&] { return q_.bytes() + k_.bytes() + v_.bytes(); });
    forward_linears(ctx, h, T, {{&q_, q}, {&k_, k}, {&v_, v}});
  }
  const PagedKV& cache = ctx.kv->layers[size_t(layer)];
  const int64_t bs = ctx.kv->block_size;
  // Per token (tokens write distinct cache slots): q/k norms, RoPE, and K/V
  // into the cache before attention, so token t reads [0, pos] from it.
  {
    profile::Scope s(profile::Stage::AttnPrep);
    const float* angles = rope_ ? token_angles(ctx, *rope_) : nullptr;
    const int64_t R = rope_ ? rope_->rot_dim() : 0;
    for_rows(ctx.exec, T, [&](int64_t t0, int64_t t1) {
      if (q_norm_.weight) {
        q_norm_.forward(q + t0 * NH * D, (t1 - t0) * NH, q + t0 * NH * D);
        k_norm_.forward(k + t0 * NKV * D, (t1 - t0) * NKV, k + t0 * NKV * D);
      }
      for (int64_t t = t0; t < t1; ++t) {
        const BatchItem& item = ctx.batch[size_t(ctx.tokens.seq[t])];
        const int64_t pos = ctx.tokens.pos[t];
        if (rope_) {
          rope_->apply_angles(q + t * NH * D, NH, D, angles + t * R);
          rope_->apply_angles(k + t * NKV * D, NKV, D, angles + t * R);
        }
        const int64_t slot = int64_t(item.block_table[size_t(pos / bs)]) * bs + pos % bs;
        ops::store_kv(cache, slot, k + t * NKV * D, v + t * NKV * D);
      }
    });
  }
  // What attention reads from the cache: each sequence's context once, all
  // K/V heads, K and V.
  auto kv_bytes = [&] {
    const uint64_t row = uint64_t(cache.head_dim) * dtype_size(cache.dtype) + (cache.dtype == DType::I8 ? 4 : 0);
    uint64_t n = 0;
    for (const auto& item : ctx.batch) n += uint64_t(item.start_pos + int64_t(item.tokens.size())) * 2 * row * uint64_t(NKV);
    return n;
  };
  {
    profile::Scope s(profile::Stage::Attention, kv_bytes);
    ops::paged_attention(ctx.exec, ctx.tokens, q, NH, cache, scale_, alibi_.empty() ? nullptr : alibi_.data() + head0_,
                         attn);
  }
  profile::Scope s(profile::Stage::AttnOut, [&] { return o_.bytes(); });
  o_.forward(ctx, attn, T, out);
}

}  // namespace rinfer

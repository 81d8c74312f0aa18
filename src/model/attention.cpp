#include "model/attention.h"

#include <cmath>

namespace rinfer {

namespace kc = kernels::cpu;

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
      scale_(float(1.0 / std::sqrt(double(shape.head_dim)))) {}

void GqaAttention::forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) {
  const int64_t T = ctx.n_tokens, D = s_.head_dim, NH = s_.n_heads, NKV = s_.n_kv_heads;
  const int64_t group = NH / NKV;
  Workspace& ws = *ctx.ws;
  ThreadPool& pool = *ctx.pool;
  KVCache& kv = *ctx.kv;
  float* q = ws.get(Workspace::kQ, size_t(T * NH * D));
  float* k = ws.get(Workspace::kK, size_t(T * NKV * D));
  float* v = ws.get(Workspace::kV, size_t(T * NKV * D));
  float* attn = ws.get(Workspace::kAttn, size_t(T * NH * D));
  float* scores = ws.get(Workspace::kScores, size_t(pool.size()) * size_t(ctx.max_ctx));
  q_.forward(h, T, q, pool);
  k_.forward(h, T, k, pool);
  v_.forward(h, T, v, pool);
  kc::PagedKV cache = kv.layer(layer);
  const int64_t bs = kv.block_size();
  if (q_norm_.weight) {
    q_norm_.forward(q, T * NH, q);
    k_norm_.forward(k, T * NKV, k);
  }
  for (int64_t t = 0; t < T; ++t) {
    const BatchItem& item = ctx.batch[size_t(ctx.tok_item[t])];
    const int64_t pos = ctx.tok_pos[t];
    if (rope_) {
      const int64_t seq_len = item.start_pos + int64_t(item.tokens.size());
      rope_->apply(q + t * NH * D, NH, D, pos, seq_len);
      rope_->apply(k + t * NKV * D, NKV, D, pos, seq_len);
    }
    // K/V go into the cache before attention, so token t reads [0, pos] from it.
    const int64_t slot = int64_t(item.block_table[size_t(pos / bs)]) * bs + pos % bs;
    kc::store_kv(cache, slot, k + t * NKV * D, v + t * NKV * D);
  }
  pool.run(T * NH, [&](int64_t task, int thread) {
    const int64_t tok = task / NH, head = task % NH;
    const BatchItem& item = ctx.batch[size_t(ctx.tok_item[tok])];
    kc::attention_head(q + (tok * NH + head) * D, cache, int(head / group), item.block_table.data(),
                       ctx.tok_pos[tok] + 1, scale_, alibi_.empty() ? 0.0f : alibi_[size_t(head)],
                       attn + (tok * NH + head) * D, scores + int64_t(thread) * ctx.max_ctx);
  });
  o_.forward(attn, T, out, pool);
}

}  // namespace rinfer

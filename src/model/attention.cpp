#include "model/attention.h"

#include <algorithm>
#include <cmath>

#include "model/stage_profile.h"

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

const float* token_angles(const ForwardContext& ctx, const RotaryEmbedding& rope) {
  TokenAngles fresh;
  TokenAngles& ta = ctx.angles ? *ctx.angles : fresh;
  if (ta.owner == &rope) return ta.cs;
  const int64_t R = rope.rot_dim();
  float* cs = ctx.ws->get(Workspace::kAngles, size_t(ctx.n_tokens * R));
  for_rows(*ctx.pool, ctx.n_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const BatchItem& item = ctx.batch[size_t(ctx.tok_item[t])];
      rope.angles(ctx.tok_pos[t], item.start_pos + int64_t(item.tokens.size()), cs + t * R);
    }
  });
  ta.owner = &rope;
  ta.cs = cs;
  return cs;
}

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
  {
    profile::Scope s(profile::Stage::Qkv, [&] { return q_.bytes() + k_.bytes() + v_.bytes(); });
    forward_linears(h, T, {{&q_, q}, {&k_, k}, {&v_, v}}, pool);
  }
  kc::PagedKV cache = kv.layer(layer);
  const int64_t bs = kv.block_size();
  // Per token (tokens write distinct cache slots): q/k norms, RoPE, and K/V
  // into the cache before attention, so token t reads [0, pos] from it.
  {
    profile::Scope s(profile::Stage::AttnPrep);
    const float* angles = rope_ ? token_angles(ctx, *rope_) : nullptr;
    const int64_t R = rope_ ? rope_->rot_dim() : 0;
    for_rows(pool, T, [&](int64_t t0, int64_t t1) {
      if (q_norm_.weight) {
        q_norm_.forward(q + t0 * NH * D, (t1 - t0) * NH, q + t0 * NH * D);
        k_norm_.forward(k + t0 * NKV * D, (t1 - t0) * NKV, k + t0 * NKV * D);
      }
      for (int64_t t = t0; t < t1; ++t) {
        const BatchItem& item = ctx.batch[size_t(ctx.tok_item[t])];
        const int64_t pos = ctx.tok_pos[t];
        if (rope_) {
          rope_->apply_angles(q + t * NH * D, NH, D, angles + t * R);
          rope_->apply_angles(k + t * NKV * D, NKV, D, angles + t * R);
        }
        const int64_t slot = int64_t(item.block_table[size_t(pos / bs)]) * bs + pos % bs;
        kc::store_kv(cache, slot, k + t * NKV * D, v + t * NKV * D);
      }
    });
  }
  // One task per (run of tokens of one sequence, K/V head, tile): the rows of
  // a tile (query heads of the group x up to tq tokens) share every K/V block
  // read. Decode with fewer (sequence, K/V head) pairs than threads splits a
  // group's heads so that every thread has work.
  const int64_t head_tile = std::min<int64_t>(group, kMaxAttnRows);
  const int64_t tq = std::max<int64_t>(1, kMaxAttnRows / head_tile);
  runs_.clear();
  for (int64_t t = 0; t < T;) {
    int64_t e = t + 1;
    while (e < T && e - t < tq && ctx.tok_item[e] == ctx.tok_item[t]) ++e;
    runs_.push_back({t, e - t});
    t = e;
  }
  // Longest context first: the pool hands tasks out in order, and a prompt's
  // last runs cost the most (causal); in token order they came last, when
  // the other thread may have nothing left. Prompt attention per layer, the
  // two orders in turn (512 tokens, 2 threads): qwen2.5-0.5b 2845 -> 2769
  // us, tinyllama 5897 -> 5878. Each row's result does not depend on the
  // order.
  std::sort(runs_.begin(), runs_.end(), [&](const TokenRun& a, const TokenRun& b) {
    const int64_t pa = ctx.tok_pos[a.t0 + a.n - 1], pb = ctx.tok_pos[b.t0 + b.n - 1];
    return pa != pb ? pa > pb : a.t0 < b.t0;
  });
  int64_t head_chunks = (group + head_tile - 1) / head_tile;
  const int64_t pairs = int64_t(runs_.size()) * NKV * head_chunks;
  if (pairs < pool.size()) head_chunks = std::min<int64_t>(group, head_chunks * ((pool.size() + pairs - 1) / pairs));
  const int64_t heads_per_chunk = (group + head_chunks - 1) / head_chunks;
  head_chunks = (group + heads_per_chunk - 1) / heads_per_chunk;
  const int64_t n_tasks = int64_t(runs_.size()) * NKV * head_chunks;
  // What the tasks read from the cache: each sequence's context once (the
  // tasks of one K/V head share it), all K/V heads, K and V.
  auto kv_bytes = [&] {
    const uint64_t row = uint64_t(cache.head_dim) * dtype_size(cache.dtype) + (cache.dtype == DType::I8 ? 4 : 0);
    uint64_t n = 0;
    for (const auto& item : ctx.batch) n += uint64_t(item.start_pos + int64_t(item.tokens.size())) * 2 * row * uint64_t(NKV);
    return n;
  };
  {
    profile::Scope s(profile::Stage::Attention, kv_bytes);
    pool.run(n_tasks, [&](int64_t task, int) {
      const TokenRun run = runs_[size_t(task / (NKV * head_chunks))];
      const int64_t kvh = task / head_chunks % NKV, h0 = kvh * group + task % head_chunks * heads_per_chunk;
      const int64_t h1 = std::min(h0 + heads_per_chunk, (kvh + 1) * group);
      kc::AttnRow rows[kMaxAttnRows];
      int n = 0;
      for (int64_t tok = run.t0; tok < run.t0 + run.n; ++tok)
        for (int64_t head = h0; head < h1; ++head)
          rows[n++] = {q + (tok * NH + head) * D, attn + (tok * NH + head) * D, ctx.tok_pos[tok] + 1,
                       alibi_.empty() ? 0.0f : alibi_[size_t(head)]};
      const BatchItem& item = ctx.batch[size_t(ctx.tok_item[run.t0])];
      kc::attention_rows(rows, n, cache, int(kvh), item.block_table.data(), scale_);
    });
  }
  profile::Scope s(profile::Stage::AttnOut, [&] { return o_.bytes(); });
  o_.forward(attn, T, out, pool);
}

}  // namespace rinfer

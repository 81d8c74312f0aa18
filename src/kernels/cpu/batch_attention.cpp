#include "kernels/cpu/batch_attention.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/latent_attention.h"
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu {

namespace {

// At most this many (token, head) rows share a task's K/V reads: a prompt's
// rows go through attention_rows in tiles of 16 rows in vector lanes, and 64
// keeps them full for groups of up to 7 heads.
constexpr int64_t kMaxAttnRows = 64;

struct TokenRun {
  int64_t t0, n;  // consecutive tokens of one sequence
};

}  // namespace

void batch_attention(ThreadPool& pool, const ops::TokenBatch& tb, const float* q, int64_t NH, const PagedKV& kv,
                     float scale, const float* alibi, float* out) {
  const int64_t T = tb.n_tokens, D = kv.head_dim, NKV = kv.n_kv_heads;
  const int64_t group = NH / NKV;
  // One task per (run of tokens of one sequence, K/V head, tile): the rows of
  // a tile (query heads of the group x up to tq tokens) share every K/V block
  // read. Decode with fewer (sequence, K/V head) pairs than threads splits a
  // group's heads so that every thread has work.
  const int64_t head_tile = std::min<int64_t>(group, kMaxAttnRows);
  const int64_t tq = std::max<int64_t>(1, kMaxAttnRows / head_tile);
  thread_local std::vector<TokenRun> runs;  // grows once: nothing allocated per token
  runs.clear();
  for (int64_t t = 0; t < T;) {
    int64_t e = t + 1;
    while (e < T && e - t < tq && tb.seq[e] == tb.seq[t]) ++e;
    runs.push_back({t, e - t});
    t = e;
  }
  // Longest context first: the pool hands tasks out in order and a prompt's
  // last runs cost the most (causal), so in token order they would come last,
  // when the other threads may have nothing left. No row depends on the order.
  std::sort(runs.begin(), runs.end(), [&](const TokenRun& a, const TokenRun& b) {
    const int64_t pa = tb.pos[a.t0 + a.n - 1], pb = tb.pos[b.t0 + b.n - 1];
    return pa != pb ? pa > pb : a.t0 < b.t0;
  });
  int64_t head_chunks = (group + head_tile - 1) / head_tile;
  const int64_t pairs = int64_t(runs.size()) * NKV * head_chunks;
  if (pairs < pool.size()) head_chunks = std::min<int64_t>(group, head_chunks * ((pool.size() + pairs - 1) / pairs));
  const int64_t heads_per_chunk = (group + head_chunks - 1) / head_chunks;
  head_chunks = (group + heads_per_chunk - 1) / heads_per_chunk;
  const int64_t n_tasks = int64_t(runs.size()) * NKV * head_chunks;
  const std::vector<TokenRun>& plan = runs;
  pool.run(n_tasks, [&](int64_t task, int) {
    const TokenRun run = plan[size_t(task / (NKV * head_chunks))];
    const int64_t kvh = task / head_chunks % NKV, h0 = kvh * group + task % head_chunks * heads_per_chunk;
    const int64_t h1 = std::min(h0 + heads_per_chunk, (kvh + 1) * group);
    AttnRow rows[kMaxAttnRows];
    int n = 0;
    for (int64_t tok = run.t0; tok < run.t0 + run.n; ++tok)
      for (int64_t head = h0; head < h1; ++head)
        rows[n++] = {q + (tok * NH + head) * D, out + (tok * NH + head) * D, tb.pos[tok] + 1,
                     alibi ? alibi[head] : 0.0f};
    attention_rows(rows, n, kv, int(kvh), tb.block_tables[tb.seq[run.t0]], scale);
  });
}

void batch_latent_attention(ThreadPool& pool, const ops::TokenBatch& tb, const float* q, int64_t NH,
                            const PagedKV& kv, int latent_dim, float scale, float* out) {
  const int64_t ROW = kv.head_dim, max_ctx = tb.max_ctx;
  // A task is a group of one token's heads (which share its cache rows):
  // all of them when there are tokens enough for the threads, else the
  // heads split so that every thread has some.
  // At most 16 heads per task: a task's scores are heads x context floats.
  const int64_t groups = std::max<int64_t>(
      (NH + 15) / 16,
      tb.n_tokens >= pool.size() ? 1 : std::min<int64_t>(NH, (pool.size() + tb.n_tokens - 1) / tb.n_tokens));
  const int64_t per = (NH + groups - 1) / groups;
  pool.run(tb.n_tokens * groups, [&](int64_t task, int) {
    const int64_t tok = task / groups, h0 = (task % groups) * per, n = std::min(per, NH - h0);
    if (n <= 0) return;
    thread_local std::vector<float> scratch;  // the calling thread's, grow-only
    const int64_t need = latent_attention_scratch(int(n), max_ctx, int(ROW), kv.block_size);
    if (int64_t(scratch.size()) < need) scratch.resize(size_t(need));
    latent_attention_heads(q + (tok * NH + h0) * ROW, int(n), kv, tb.block_tables[tb.seq[tok]], tb.pos[tok] + 1,
                           latent_dim, scale, out + (tok * NH + h0) * latent_dim, scratch.data());
  });
}

}  // namespace rinfer::kernels::cpu

// Micro-benchmarks of the CPU kernels (Google Benchmark).
//
//   build-kern/bin/bench_kernels [--benchmark_filter=gemv] [--benchmark_min_time=0.5]
//
// gemv/*   decode matmul (M = 1 or 4) on TinyLlama-1.1B shapes. "cold" streams a
//          different copy of W every iteration from a >= 1 GiB arena (bigger
//          than any cache, as in a real decode step over all layers); "hot"
//          reuses one W (cache resident when it fits). bytes_per_second counts
//          W bytes; bw_frac = achieved / 35 GB/s (1 thread) or 61 GB/s (2).
// gemm/*   prefill matmul; FLOP/s = 2 M N K per second, peak_frac = FLOP/s /
//          (200 GFLOP/s per thread, AVX-512 FMA peak of this class of CPU).
// membw/*  plain AVX-512 read of the arena: the machine's read bandwidth now,
//          to put the gemv numbers in context (the VM's bandwidth varies).
// qgemv/*  decode matmul_q on quantized weights (Q8/Q4, group 32/128, f16
//          scales), cold like gemv/*. bytes_per_second counts the quantized
//          weight + scale bytes; bw_frac = that / the read bandwidth of
//          /work/shared/tools/membw.c measured in the same session, passed as
//          RINFER_MEMBW_GBS_1 / RINFER_MEMBW_GBS_2 (defaults 15.9 / 30.5). The label is the path.
// qgemm/*  prefill matmul_q (W8A8/W4A8 VNNI on AVX-512); OP/s = 2 M N K per
//          second, peak_frac = OP/s / (RINFER_VNNI_GOPS per thread, default
//          648, membw.c's "int8 vnni zmm" figure).
// attention/*, ops/*: the other kernels at model sizes; attention/prompt/* is
// one layer of a causal prompt as the model calls it; attention/cold/* reads
//          another copy of the layer's K/V cache from the arena every call
//          (as in decode, where the weights evicted it), bytes = K/V read;
//          attention/hot/* reads the same copy every call (the difference
//          is the memory time the arithmetic does not hide).
//
// Environment: RINFER_BENCH_ARENA_MB (default 1536) sizes the cold arena.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "perf/decode_tuning.h"
#include "read_probe.h"

namespace kc = rinfer::kernels::cpu;
using rinfer::DType;

namespace {

constexpr double kRefBw1 = 35e9, kRefBw2 = 61e9;  // GB/s quoted for this machine
constexpr double kPeakFlopsPerThread = 200e9;

rinfer::ThreadPool& pool(int n) {
  static std::unique_ptr<rinfer::ThreadPool> pools[3];
  if (!pools[n]) pools[n] = std::make_unique<rinfer::ThreadPool>(n);
  return *pools[n];
}

// A big buffer of 16-bit values that are valid, normal numbers whether read as
// F16, BF16 or (in pairs) F32, so any weight dtype can be streamed from it.
rinfer::Buffer& arena() {
  static rinfer::Buffer buf = [] {
    size_t mb = 1536;
    if (const char* e = std::getenv("RINFER_BENCH_ARENA_MB")) mb = std::strtoull(e, nullptr, 10);
    rinfer::Buffer b(mb << 20);
    auto* p = b.as<uint16_t>();
    uint32_t s = 12345;
    for (size_t i = 0; i < b.size() / 2; ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = uint16_t(0x3c00u | ((s >> 16) & 0x00ffu) | ((s >> 8) & 0x8000u));  // +-(1..2) f16, +-2^-7.. bf16
    }
    return b;
  }();
  return buf;
}

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

const char* dname(DType d) { return d == DType::F32 ? "f32" : d == DType::F16 ? "f16" : "bf16"; }

// ---------------------------------------------------------------- matmul
// blocked: BF16 weights in the blocked layout (matmul_bf16_blocked); any bytes are valid BF16.
void run_matmul(benchmark::State& st, int64_t M, int64_t K, int64_t N, DType dt, int threads, bool cold,
                bool blocked = false) {
  const size_t wbytes = size_t(N * K) * rinfer::dtype_size(dt);
  auto& ar = arena();
  const size_t copies = cold ? std::max<size_t>(1, ar.size() / wbytes) : 1;
  if (cold && copies < 4) st.SkipWithError("arena too small for a cold run of this shape");
  auto x = random_vec(size_t(M * K), 1);
  std::vector<float> y(size_t(M * N));
  auto& p = pool(threads);
  const auto* base = static_cast<const uint8_t*>(ar.data());
  size_t i = 0;
  // warm up: page in / fault the arena copies used
  auto mm = [&](const uint8_t* w) {
    if (blocked)
      kc::matmul_bf16_blocked(x.data(), M, K, K, reinterpret_cast<const uint16_t*>(w), N, nullptr, y.data(), N, p);
    else
      kc::matmul(x.data(), M, K, K, w, dt, N, nullptr, y.data(), N, p);
  };
  mm(base);
  for (auto _ : st) {
    mm(base + (i % copies) * wbytes);
    ++i;
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(wbytes));
  const double flops = 2.0 * double(M) * double(N) * double(K);
  st.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  if (M <= 8)
    st.counters["bw_frac"] = benchmark::Counter(double(wbytes) / (threads == 1 ? kRefBw1 : kRefBw2),
                                                benchmark::Counter::kIsIterationInvariantRate);
  else
    st.counters["peak_frac"] = benchmark::Counter(flops / (kPeakFlopsPerThread * threads),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(std::string(kc::active_level_name()) + " " + kc::matmul_path(M, dt) + (blocked ? " blocked" : ""));
}

// ---------------------------------------------------------------- quantized matmul
double env_or(const char* name, double dflt) {
  const char* e = std::getenv(name);
  return e ? std::strtod(e, nullptr) : dflt;
}

void run_matmul_q(benchmark::State& st, int64_t M, int64_t K, int64_t N, kc::QuantType qt, int64_t gs, int threads,
                  bool cold) {
  kc::QuantizedWeight w;
  w.type = qt;
  w.N = N;
  w.K = K;
  w.group_size = gs;
  w.scale_dtype = DType::F16;
  const size_t dbytes = kc::quant_data_bytes(qt, N, K), sbytes = kc::quant_scale_bytes(N, K, gs, DType::F16);
  const size_t stride = (dbytes + sbytes + 4095) / 4096 * 4096;
  auto& ar = arena();  // any bytes are valid quants; the arena's 16-bit values are valid f16 scales
  const size_t copies = cold ? std::max<size_t>(1, ar.size() / stride) : 1;
  if (cold && copies < 4) st.SkipWithError("arena too small for a cold run of this shape");
  auto x = random_vec(size_t(M * K), 1);
  std::vector<float> y(size_t(M * N));
  auto& p = pool(threads);
  const auto* base = static_cast<const uint8_t*>(ar.data());
  auto at = [&](size_t i) {
    w.data = base + (i % copies) * stride;
    w.scales = base + (i % copies) * stride + dbytes;
  };
  at(0);
  kc::matmul_q(x.data(), M, K, K, w, nullptr, y.data(), N, p);
  size_t i = 0;
  for (auto _ : st) {
    at(i++);
    kc::matmul_q(x.data(), M, K, K, w, nullptr, y.data(), N, p);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(dbytes + sbytes));
  const double ops = 2.0 * double(M) * double(N) * double(K);
  st.counters["OP/s"] = benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate);
  if (M <= kc::quant_gemv_max_m()) {
    const double bw = env_or(threads == 1 ? "RINFER_MEMBW_GBS_1" : "RINFER_MEMBW_GBS_2", threads == 1 ? 15.9 : 30.5);
    st.counters["bw_frac"] =
        benchmark::Counter(double(dbytes + sbytes) / (bw * 1e9), benchmark::Counter::kIsIterationInvariantRate);
  } else {
    st.counters["peak_frac"] = benchmark::Counter(ops / (env_or("RINFER_VNNI_GOPS", 648) * 1e9 * threads),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  }
  st.SetLabel(std::string(kc::active_level_name()) + " " + kc::matmul_q_path(M, w));
}

// ---------------------------------------------------------------- memory read roofline
using rinfer::bench::read_avx512;

void BM_MemRead(benchmark::State& st, int threads) {
  if (!rinfer::cpu_features().has_avx512_core()) {
    st.SkipWithError("needs AVX-512");
    return;
  }
  auto& ar = arena();
  const size_t chunk = size_t(64) << 20, n_chunks = ar.size() / chunk;
  const auto* base = static_cast<const uint8_t*>(ar.data());
  std::vector<uint64_t> sink(size_t(threads) * 8);
  size_t c = 0;
  for (auto _ : st) {
    const uint8_t* p = base + (c++ % n_chunks) * chunk;
    pool(threads).run(threads, [&](int64_t t, int) {
      size_t part = chunk / size_t(threads);
      sink[size_t(t) * 8] += read_avx512(p + size_t(t) * part, part);
    });
  }
  benchmark::DoNotOptimize(sink.data());
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(chunk));
}

// ---------------------------------------------------------------- attention
// A block table over blocks 0 .. n_blocks - 1; shuffled: in an order a
// serving pool hands them out (the same order every call).
std::vector<int32_t> block_table(int64_t n_blocks, bool shuffled) {
  std::vector<int32_t> t(static_cast<size_t>(n_blocks));
  std::iota(t.begin(), t.end(), 0);
  if (shuffled) std::shuffle(t.begin(), t.end(), std::mt19937(4));
  return t;
}

// One token's decode rows: query head h (q and out at h * head_dim) over the
// first n_ctx positions, no ALiBi.
std::vector<kc::AttnRow> decode_rows(const float* q, float* out, int n_q_heads, int head_dim, int64_t n_ctx) {
  std::vector<kc::AttnRow> rows;
  for (int h = 0; h < n_q_heads; ++h) rows.push_back({q + h * head_dim, out + h * head_dim, n_ctx, 0.0f});
  return rows;
}

// One layer's paged K/V cache of n_ctx random tokens in dtype dt, block size
// 16; shuffled: the block table visits the blocks out of order, as a
// serving pool hands them out.
struct BenchCache {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
  kc::PagedKV kv;
  size_t esz;
};
BenchCache make_bench_cache(DType dt, int64_t n_ctx, int head_dim, int n_kv_heads, bool shuffled) {
  const int bs = 16;
  const int64_t n_blocks = (n_ctx + bs - 1) / bs;
  BenchCache c;
  c.esz = rinfer::dtype_size(dt);
  const size_t per_block = size_t(bs) * n_kv_heads * head_dim;
  c.k.resize(n_blocks * per_block * c.esz);
  c.v.resize(n_blocks * per_block * c.esz);
  auto kf = random_vec(n_blocks * per_block, 2), vf = random_vec(n_blocks * per_block, 3);
  rinfer::convert_from_f32(dt, kf.data(), c.k.data(), kf.size());
  rinfer::convert_from_f32(dt, vf.data(), c.v.data(), vf.size());
  c.table = block_table(n_blocks, shuffled);
  c.kv = kc::PagedKV{c.k.data(), c.v.data(), dt, bs, n_kv_heads, head_dim};
  c.kv.n_blocks = n_blocks;
  return c;
}

// rows: one attention_rows call per K/V head (the group's query heads share
// its blocks) instead of attention_head per query head; bytes_per_second
// counts the K/V bytes of every query head either way, so times compare.
void BM_Attention(benchmark::State& st, DType dt, int64_t n_ctx, int head_dim, int n_kv_heads, int n_q_heads,
                  bool rows = false) {
  const BenchCache cache = make_bench_cache(dt, n_ctx, head_dim, n_kv_heads, true);
  const kc::PagedKV& kv = cache.kv;
  const std::vector<int32_t>& table = cache.table;
  const size_t esz = cache.esz;
  auto q = random_vec(size_t(n_q_heads) * head_dim, 5);
  std::vector<float> out(size_t(n_q_heads) * head_dim), scratch(static_cast<size_t>(n_ctx));
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const int group = n_q_heads / n_kv_heads;
  const std::vector<kc::AttnRow> row_list = decode_rows(q.data(), out.data(), n_q_heads, head_dim, n_ctx);
  for (auto _ : st) {
    // all query heads of one layer for one token (GQA: kv head = h / group)
    if (rows) {
      for (int g = 0; g < n_kv_heads; ++g) kc::attention_rows(row_list.data() + g * group, group, kv, g, table.data(), scale);
    } else {
      for (int h = 0; h < n_q_heads; ++h)
        kc::attention_head(q.data() + h * head_dim, kv, h / group, table.data(), n_ctx, scale, 0.0f,
                           out.data() + h * head_dim, scratch.data());
    }
    benchmark::ClobberMemory();
  }
  // K and V bytes each query head reads
  st.SetBytesProcessed(int64_t(st.iterations()) * n_q_heads * n_ctx * head_dim * 2 * int64_t(esz));
  st.SetLabel(kc::active_level_name());
}

// cold: as the model decodes, the layer's K/V come from memory (the weights
// streamed since its last visit evicted them): each iteration reads another
// copy of the layer's cache from the arena (any u16 is a valid bf16/f16).
// bytes_per_second counts the K/V bytes read once per call. The block table
// is shuffled (a cache after many requests came and went) unless
// `sequential` (.../seq: a sequence's blocks in order, as a fresh engine's
// first request gets them; the hardware prefetchers then help). threads > 1
// (.../threads:2): the K/V heads are the tasks of one pool job, as the model
// runs a decode step's attention.
void BM_AttentionCold(benchmark::State& st, DType dt, int64_t n_ctx, int head_dim, int n_kv_heads, int n_q_heads,
                      bool sequential = false, int threads = 1, bool hot = false) {
  const int bs = 16;
  const int64_t n_blocks = (n_ctx + bs - 1) / bs;
  const size_t side = size_t(n_blocks) * bs * n_kv_heads * head_dim * rinfer::dtype_size(dt);
  auto& ar = arena();
  const size_t copies = ar.size() / (2 * side);
  if (copies < 16) st.SkipWithError("arena too small for a cold run of this context");
  const std::vector<int32_t> table = block_table(n_blocks, !sequential);
  auto q = random_vec(size_t(n_q_heads) * head_dim, 5);
  std::vector<float> out(size_t(n_q_heads) * head_dim);
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const int group = n_q_heads / n_kv_heads;
  const std::vector<kc::AttnRow> row_list = decode_rows(q.data(), out.data(), n_q_heads, head_dim, n_ctx);
  auto* base = static_cast<uint8_t*>(ar.data());
  // I8: any byte is a valid value; each copy has its own K and V scales
  // (one f32 per slot and head), cold like the values, as in the model.
  const size_t n_scales = dt == DType::I8 ? size_t(n_blocks) * bs * n_kv_heads : 0;
  rinfer::Buffer scales(copies * 2 * n_scales * sizeof(float));
  for (size_t j = 0; j < copies * 2 * n_scales; ++j) scales.as<float>()[j] = 0.01f;
  size_t i = 0;
  for (auto _ : st) {
    const size_t c = hot ? 0 : i++ % copies;
    uint8_t* k = base + c * 2 * side;
    kc::PagedKV kv{k, k + side, dt, bs, n_kv_heads, head_dim};
    kv.n_blocks = n_blocks;
    if (dt == DType::I8) {
      kv.k_scale = scales.as<float>() + c * 2 * n_scales;
      kv.v_scale = kv.k_scale + n_scales;
    }
    if (threads > 1)
      pool(threads).run(n_kv_heads, [&](int64_t g, int) {
        kc::attention_rows(row_list.data() + g * group, group, kv, int(g), table.data(), scale);
      });
    else
      for (int g = 0; g < n_kv_heads; ++g)
        kc::attention_rows(row_list.data() + g * group, group, kv, g, table.data(), scale);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(2 * side));
  st.SetLabel(kc::active_level_name());
}

// prompt: one layer's attention over a whole prompt of n_ctx tokens (causal),
// called as the model calls it: per K/V head, runs of max_rows / group
// tokens x the group's query heads per attention_rows call. FLOP/s counts
// the two products (q.K and p.V) over each token's positions.
void BM_AttentionPrompt(benchmark::State& st, DType dt, int64_t n_ctx, int head_dim, int n_kv_heads, int n_q_heads,
                        int max_rows) {
  const BenchCache cache = make_bench_cache(dt, n_ctx, head_dim, n_kv_heads, false);
  const kc::PagedKV& kv = cache.kv;
  const std::vector<int32_t>& table = cache.table;
  auto q = random_vec(size_t(n_ctx) * n_q_heads * head_dim, 5);
  std::vector<float> out(q.size());
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const int group = n_q_heads / n_kv_heads;
  const int64_t tq = std::max(1, max_rows / group);
  std::vector<std::vector<kc::AttnRow>> calls;  // [run][kv head] -> rows
  for (int64_t t0 = 0; t0 < n_ctx; t0 += tq)
    for (int g = 0; g < n_kv_heads; ++g) {
      std::vector<kc::AttnRow> rows;
      for (int64_t t = t0; t < std::min(n_ctx, t0 + tq); ++t)
        for (int h = g * group; h < (g + 1) * group; ++h)
          rows.push_back({q.data() + (t * n_q_heads + h) * head_dim, out.data() + (t * n_q_heads + h) * head_dim, t + 1,
                          0.0f});
      calls.push_back(std::move(rows));
    }
  for (auto _ : st) {
    for (size_t c = 0; c < calls.size(); ++c)
      kc::attention_rows(calls[c].data(), int(calls[c].size()), kv, int(c % size_t(n_kv_heads)), table.data(), scale);
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * n_q_heads * head_dim * double(n_ctx) * double(n_ctx + 1) / 2;
  st.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(kc::active_level_name());
}

// ---------------------------------------------------------------- small ops
void BM_Rmsnorm(benchmark::State& st, int64_t n) {
  auto x = random_vec(size_t(n), 6), w = random_vec(size_t(n), 7);
  std::vector<float> y(static_cast<size_t>(n));
  for (auto _ : st) {
    kc::rmsnorm(x.data(), w.data(), n, 1e-5f, y.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * n);
}
void BM_SiluMul(benchmark::State& st, int64_t n) {
  auto g = random_vec(size_t(n), 8), u = random_vec(size_t(n), 9);
  std::vector<float> y(static_cast<size_t>(n));
  for (auto _ : st) {
    kc::silu_mul(g.data(), u.data(), y.data(), n);
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * n);
}
void BM_Softmax(benchmark::State& st, int64_t n) {
  auto x0 = random_vec(size_t(n), 10);
  std::vector<float> x = x0;
  for (auto _ : st) {
    std::memcpy(x.data(), x0.data(), x.size() * 4);
    kc::softmax(x.data(), n);
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * n);
}
// Greedy sampling's argmax over a vocabulary of logits (qwen2.5: 151936),
// from the caches as the output layer leaves them.
void BM_Argmax(benchmark::State& st, int64_t n) {
  auto x = random_vec(size_t(n), 12);
  int64_t sink = 0;
  for (auto _ : st) {
    sink += kc::argmax(x.data(), n);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(sink);
  st.SetItemsProcessed(st.iterations() * n);
}
void BM_Rope(benchmark::State& st, int n_heads, int head_dim, kc::RopeStyle style) {
  auto x = random_vec(size_t(n_heads) * head_dim, 11);
  std::vector<float> inv(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / head_dim);
  int64_t pos = 100;
  for (auto _ : st) {
    kc::rope(x.data(), n_heads, head_dim, head_dim, pos++, inv.data(), style, 1.0f);
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * n_heads * head_dim);
}

// ---------------------------------------------------------------- registration
// avx_vnni at the AVX2 level (kc::force_avx_vnni): -1 as the CPU has it
// (what a run gets by default), 0 plain AVX2 (the "/avx2/" rows), 1 AVX-VNNI.
template <typename F>
void reg(const std::string& name, F f, kc::Isa isa, int avx_vnni = -1) {
  benchmark::RegisterBenchmark(name.c_str(), [f, isa, avx_vnni](benchmark::State& st) {
    kc::force_isa(isa);
    kc::force_avx_vnni(avx_vnni);
    f(st);
    kc::force_isa(kc::best_isa());
    kc::force_avx_vnni(-1);
  })->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void register_all() {
  const kc::Isa best = kc::best_isa();
  struct Shape {
    const char* what;
    int64_t K, N;
  };
  // TinyLlama-1.1B: hidden 2048, 32 q heads / 4 kv heads of 64, MLP 5632, vocab 32000
  const Shape decode[] = {{"q_o", 2048, 2048}, {"k_v", 2048, 256}, {"gate_up", 2048, 5632},
                          {"down", 5632, 2048}, {"lm_head", 2048, 32000}};
  for (int threads : {1, 2})
    for (DType dt : {DType::BF16, DType::F16, DType::F32})
      for (const auto& s : decode) {
        std::string name = std::string("gemv/cold/") + dname(dt) + "/" + s.what + "/K" + std::to_string(s.K) + "xN" +
                           std::to_string(s.N) + "/threads:" + std::to_string(threads);
        reg(name, [=](benchmark::State& st) { run_matmul(st, 1, s.K, s.N, dt, threads, true); }, best);
      }
  for (int threads : {1, 2})
    for (const auto& s : decode) {
      std::string name = std::string("gemv/cold/bf16-blocked/") + s.what + "/K" + std::to_string(s.K) + "xN" +
                         std::to_string(s.N) + "/threads:" + std::to_string(threads);
      reg(name, [=](benchmark::State& st) { run_matmul(st, 1, s.K, s.N, DType::BF16, threads, true, true); }, best);
    }
  for (int threads : {1, 2}) {
    reg("gemv/hot/bf16/gate_up/K2048xN5632/threads:" + std::to_string(threads),
        [=](benchmark::State& st) { run_matmul(st, 1, 2048, 5632, DType::BF16, threads, false); }, best);
    reg("gemv/cold/bf16/M4/gate_up/K2048xN5632/threads:" + std::to_string(threads),
        [=](benchmark::State& st) { run_matmul(st, 4, 2048, 5632, DType::BF16, threads, true); }, best);
    if (best >= kc::Isa::Avx2 && best != kc::Isa::Avx2)
      reg("gemv/cold/bf16/gate_up/K2048xN5632/avx2/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul(st, 1, 2048, 5632, DType::BF16, threads, true); }, kc::Isa::Avx2, 0);
  }
  for (int threads : {1, 2})
    for (DType dt : {DType::BF16, DType::F16, DType::F32})
      reg(std::string("gemm/") + dname(dt) + "/M512xK2048xN2048/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul(st, 512, 2048, 2048, dt, threads, false); }, best);
  for (int threads : {1, 2}) {
    reg("gemm/bf16/M128xK2048xN5632/threads:" + std::to_string(threads),
        [=](benchmark::State& st) { run_matmul(st, 128, 2048, 5632, DType::BF16, threads, false); }, best);
    for (int64_t m : {5, 8, 12, 16, 32})
      reg("gemm/bf16/M" + std::to_string(m) + "xK2048xN2048/cold/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul(st, m, 2048, 2048, DType::BF16, threads, true); }, best);
    // Batched decode on the blocked layout (TinyLlama's gate-up).
    for (int64_t m : {9, 16, 32, 48, 64})
      reg("gemm/bf16-blocked/M" + std::to_string(m) + "xK2048xN5632/cold/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul(st, m, 2048, 5632, DType::BF16, threads, true, true); }, best);
    reg("gemm/bf16/M8xK2048xN2048/hot/threads:" + std::to_string(threads),
        [=](benchmark::State& st) { run_matmul(st, 8, 2048, 2048, DType::BF16, threads, false); }, best);
    // both BF16 GEMM modes (Auto picks one per CPU class, see ops.h)
    for (kc::Bf16Gemm mode : {kc::Bf16Gemm::F32Fma, kc::Bf16Gemm::Bf16Dot})
      reg(std::string("gemm/bf16/M512xK2048xN2048/") + (mode == kc::Bf16Gemm::F32Fma ? "fma" : "dot") +
              "/threads:" + std::to_string(threads),
          [=](benchmark::State& st) {
            kc::set_bf16_gemm(mode);
            run_matmul(st, 512, 2048, 2048, DType::BF16, threads, false);
            kc::set_bf16_gemm(kc::Bf16Gemm::Auto);
          },
          best);
    if (best > kc::Isa::Avx2)
      reg("gemm/bf16/M512xK2048xN2048/avx2/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul(st, 512, 2048, 2048, DType::BF16, threads, false); }, kc::Isa::Avx2, 0);
  }
  for (int threads : {1, 2})
    for (kc::QuantType qt : {kc::QuantType::Q8, kc::QuantType::Q4})
      for (int64_t gs : {32, 128})
        for (const auto& s : decode) {
          std::string name = std::string("qgemv/cold/") + kc::quant_type_name(qt) + "g" + std::to_string(gs) + "/" +
                             s.what + "/K" + std::to_string(s.K) + "xN" + std::to_string(s.N) +
                             "/threads:" + std::to_string(threads);
          reg(name, [=](benchmark::State& st) { run_matmul_q(st, 1, s.K, s.N, qt, gs, threads, true); }, best);
        }
  // In-cache (L2) quantized GEMV: the kernel's compute ceiling, which decode
  // reaches when the memory is faster than it.
  for (kc::QuantType qt : {kc::QuantType::Q8, kc::QuantType::Q4})
    for (int64_t n : {256, 384, 768})
      reg(std::string("qgemv/hot/") + kc::quant_type_name(qt) + "g32/K2048xN" + std::to_string(n) + "/threads:1",
          [=](benchmark::State& st) { run_matmul_q(st, 1, 2048, n, qt, 32, 1, false); }, best);
  for (int threads : {1, 2}) {
    for (kc::QuantType qt : {kc::QuantType::Q8, kc::QuantType::Q4}) {
      const std::string q = kc::quant_type_name(qt);
      // the other decode variant than Auto picks, for comparison
      const kc::QuantDecode other =
          qt == kc::QuantType::Q8 ? kc::QuantDecode::Int8Activations : kc::QuantDecode::WeightOnly;
      for (int64_t gs : {32, 128})
        reg("qgemv/cold/" + q + "g" + std::to_string(gs) + "/gate_up/K2048xN5632/other_decode/threads:" +
                std::to_string(threads),
            [=](benchmark::State& st) {
              kc::set_quant_decode(other);
              run_matmul_q(st, 1, 2048, 5632, qt, gs, threads, true);
              kc::set_quant_decode(kc::QuantDecode::Auto);
            },
            best);
      reg("qgemv/cold/" + q + "g32/M4/gate_up/K2048xN5632/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul_q(st, 4, 2048, 5632, qt, 32, threads, true); }, best);
      for (int64_t gs : {32, 128})
        reg("qgemm/" + q + "g" + std::to_string(gs) + "/M512xK2048xN2048/threads:" + std::to_string(threads),
            [=](benchmark::State& st) { run_matmul_q(st, 512, 2048, 2048, qt, gs, threads, false); }, best);
      reg("qgemm/" + q + "g32/M128xK2048xN5632/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul_q(st, 128, 2048, 5632, qt, 32, threads, false); }, best);
      // Batched decode (bench --batch, serve): a few rows against weights
      // that stream from memory (TinyLlama's gate-up), the models' default
      // groups (int8: 128, int4: 32).
      for (int64_t m : {5, 8, 16, 32})
        reg("qgemm/" + q + "g" + std::to_string(qt == kc::QuantType::Q8 ? 128 : 32) + "/M" + std::to_string(m) +
                "xK2048xN5632/cold/threads:" + std::to_string(threads),
            [=](benchmark::State& st) {
              run_matmul_q(st, m, 2048, 5632, qt, qt == kc::QuantType::Q8 ? 128 : 32, threads, true);
            },
            best);
      // Qwen2.5-0.5B's MLP at a 512-token prompt (int8: group 128, int4: 32)
      const int64_t qgs = qt == kc::QuantType::Q8 ? 128 : 32;
      reg("qgemm/" + q + "g" + std::to_string(qgs) + "/M512xK896xN4864/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul_q(st, 512, 896, 4864, qt, qgs, threads, false); }, best);
      reg("qgemm/" + q + "g" + std::to_string(qgs) + "/M512xK4864xN896/threads:" + std::to_string(threads),
          [=](benchmark::State& st) { run_matmul_q(st, 512, 4864, 896, qt, qgs, threads, false); }, best);
      if (best > kc::Isa::Avx2) {
        reg("qgemv/cold/" + q + "g32/gate_up/K2048xN5632/avx2/threads:" + std::to_string(threads),
            [=](benchmark::State& st) { run_matmul_q(st, 1, 2048, 5632, qt, 32, threads, true); }, kc::Isa::Avx2, 0);
        reg("qgemm/" + q + "g32/M512xK2048xN2048/avx2/threads:" + std::to_string(threads),
            [=](benchmark::State& st) { run_matmul_q(st, 512, 2048, 2048, qt, 32, threads, false); }, kc::Isa::Avx2, 0);
      }
      // The AVX2 level with AVX-VNNI (an Alder Lake's prefill), beside the
      // plain AVX2 one above and the AVX-512 one.
      if (best >= kc::Isa::Avx2 && rinfer::cpu_features().avx_vnni) {
        reg("qgemm/" + q + "g32/M512xK2048xN2048/avxvnni/threads:" + std::to_string(threads),
            [=](benchmark::State& st) { run_matmul_q(st, 512, 2048, 2048, qt, 32, threads, false); }, kc::Isa::Avx2,
            1);
        reg("qgemm/" + q + "g" + std::to_string(qgs) + "/M512xK896xN4864/avxvnni/threads:" + std::to_string(threads),
            [=](benchmark::State& st) { run_matmul_q(st, 512, 896, 4864, qt, qgs, threads, false); }, kc::Isa::Avx2,
            1);
      }
    }
  }
  for (int threads : {1, 2})
    reg("membw/read/threads:" + std::to_string(threads), [=](benchmark::State& st) { BM_MemRead(st, threads); }, best);
  for (DType dt : {DType::F16, DType::BF16, DType::F32})
    for (int64_t n_ctx : {128, 512, 2048})
      for (bool rows : {false, true})
        reg(std::string("attention/") + dname(dt) + "/32q4kv_hd64/ctx" + std::to_string(n_ctx) + (rows ? "/rows" : ""),
            [=](benchmark::State& st) { BM_Attention(st, dt, n_ctx, 64, 4, 32, rows); }, best);
  for (int64_t n_ctx : {512, 2048})
    reg("attention/cold/bf16/32q4kv_hd64/ctx" + std::to_string(n_ctx) + "/rows",
        [=](benchmark::State& st) { BM_AttentionCold(st, DType::BF16, n_ctx, 64, 4, 32); }, best);
  reg("attention/bf16/32q4kv_hd64/ctx512/rows/avx2",
      [=](benchmark::State& st) { BM_Attention(st, DType::BF16, 512, 64, 4, 32, true); }, kc::Isa::Avx2, 0);
  reg("attention/cold/bf16/32q4kv_hd64/ctx512/rows/avx2",
      [=](benchmark::State& st) { BM_AttentionCold(st, DType::BF16, 512, 64, 4, 32); }, kc::Isa::Avx2, 0);
  reg("attention/bf16/14q2kv_hd64/ctx512/rows",
      [=](benchmark::State& st) { BM_Attention(st, DType::BF16, 512, 64, 2, 14, true); }, best);
  reg("attention/cold/bf16/14q2kv_hd64/ctx512/rows",
      [=](benchmark::State& st) { BM_AttentionCold(st, DType::BF16, 512, 64, 2, 14); }, best);
  // The heads over two threads, as a 2-thread decode step runs them.
  for (auto [q_heads, kv_heads] : {std::pair{14, 2}, std::pair{32, 4}})
    reg("attention/cold/bf16/" + std::to_string(q_heads) + "q" + std::to_string(kv_heads) +
            "kv_hd64/ctx512/rows/threads:2",
        [=](benchmark::State& st) { BM_AttentionCold(st, DType::BF16, 512, 64, kv_heads, q_heads, false, 2); }, best);
  // As the model's decode step at 512 tokens on 2 threads reads them (a
  // fresh engine: blocks in order), from memory and (hot: the same copy
  // every call) from the caches: the difference is the memory time the
  // arithmetic does not hide.
  for (bool hot : {false, true})
    reg(std::string("attention/") + (hot ? "hot" : "cold") + "/bf16/32q4kv_hd64/ctx512/rows/seq/threads:2",
        [=](benchmark::State& st) { BM_AttentionCold(st, DType::BF16, 512, 64, 4, 32, true, 2, hot); }, best);
  // INT8 KV cache (f32 path: each chunk widened once for the group's rows)
  for (auto [q_heads, kv_heads] : {std::pair{14, 2}, std::pair{32, 4}})
    reg("attention/cold/i8/" + std::to_string(q_heads) + "q" + std::to_string(kv_heads) + "kv_hd64/ctx512/rows",
        [=](benchmark::State& st) { BM_AttentionCold(st, DType::I8, 512, 64, kv_heads, q_heads); }, best);
  // Long contexts, where decode attention is a large part of a step.
  for (DType dt : {DType::BF16, DType::I8})
    reg(std::string("attention/cold/") + (dt == DType::I8 ? "i8" : "bf16") + "/14q2kv_hd64/ctx2048/rows",
        [=](benchmark::State& st) { BM_AttentionCold(st, dt, 2048, 64, 2, 14); }, best);
  reg("attention/cold/i8/32q4kv_hd64/ctx2048/rows",
      [=](benchmark::State& st) { BM_AttentionCold(st, DType::I8, 2048, 64, 4, 32); }, best);
  reg("attention/cold/i8/16q16kv_hd128/ctx512/rows",
      [=](benchmark::State& st) { BM_AttentionCold(st, DType::I8, 512, 128, 16, 16); }, best);
  // Blocks in order (a fresh engine's first request), both cache types.
  for (DType dt : {DType::BF16, DType::I8})
    reg(std::string("attention/cold/") + (dt == DType::I8 ? "i8" : "bf16") + "/14q2kv_hd64/ctx512/rows/seq",
        [=](benchmark::State& st) { BM_AttentionCold(st, dt, 512, 64, 2, 14, true); }, best);
  reg("attention/cold/bf16/16q16kv_hd128/ctx512/rows",
      [=](benchmark::State& st) { BM_AttentionCold(st, DType::BF16, 512, 128, 16, 16); }, best);
  // prompt: 16 rows per call (the model before rows in lanes: 14 rows for
  // a group of 7), 64 (now: tiles of 16 rows in lanes)
  for (int max_rows : {16, 64}) {
    const std::string mr = "/rows" + std::to_string(max_rows);
    reg("attention/prompt/bf16/14q2kv_hd64/ctx512" + mr,
        [=](benchmark::State& st) { BM_AttentionPrompt(st, DType::BF16, 512, 64, 2, 14, max_rows); }, best);
    reg("attention/prompt/bf16/32q4kv_hd64/ctx512" + mr,
        [=](benchmark::State& st) { BM_AttentionPrompt(st, DType::BF16, 512, 64, 4, 32, max_rows); }, best);
    reg("attention/prompt/bf16/16q16kv_hd128/ctx512" + mr,
        [=](benchmark::State& st) { BM_AttentionPrompt(st, DType::BF16, 512, 128, 16, 16, max_rows); }, best);
  }
  reg("attention/f16/8q8kv_hd128/ctx1024", [=](benchmark::State& st) { BM_Attention(st, DType::F16, 1024, 128, 8, 8); },
      best);
  for (int i = 0; i <= int(best); ++i) {
    kc::Isa isa = kc::Isa(i);
    std::string sfx = std::string("/") + kc::isa_name(isa);
    reg("ops/rmsnorm/2048" + sfx, [](benchmark::State& st) { BM_Rmsnorm(st, 2048); }, isa);
    reg("ops/silu_mul/5632" + sfx, [](benchmark::State& st) { BM_SiluMul(st, 5632); }, isa);
    reg("ops/softmax/32000" + sfx, [](benchmark::State& st) { BM_Softmax(st, 32000); }, isa);
    reg("ops/argmax/151936" + sfx, [](benchmark::State& st) { BM_Argmax(st, 151936); }, isa);
    reg("ops/argmax/8000" + sfx, [](benchmark::State& st) { BM_Argmax(st, 8000); }, isa);
    reg("ops/rope_half/32x64" + sfx,
        [](benchmark::State& st) { BM_Rope(st, 32, 64, kc::RopeStyle::RotateHalf); }, isa);
    reg("ops/rope_interleaved/32x64" + sfx,
        [](benchmark::State& st) { BM_Rope(st, 32, 64, kc::RopeStyle::Interleaved); }, isa);
  }
}

}  // namespace

int main(int argc, char** argv) {
  rinfer::perf::apply_decode_tuning();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::AddCustomContext("cpu_features", rinfer::cpu_features().summary());
  benchmark::AddCustomContext("best_isa", kc::isa_name(kc::best_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

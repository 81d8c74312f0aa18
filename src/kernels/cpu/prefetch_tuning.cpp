#include "kernels/cpu/prefetch_tuning.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"

namespace rinfer::kernels::cpu {

namespace {
// Tuned on the Zen 4 EPYC (and the Xeon before it); why each distance is
// what it is: the comments at kSparsePrefetch, kQ4NtaPrefetch and
// kQ8L2Prefetch in kernels_avx512.cpp.
constexpr DecodePrefetch kDefault{"default", 12288, 0, 12288, 24576, 0, false, 4096, 32768, 1, 1, 1, false};
// Zen 5 EPYC (family 0x1A), each choice an A/B in the model on one run,
// 2 and 1 threads (docs/performance.md):
//  - BF16: no T2 prefetch, 40-43 -> 63-66 GB/s (2 threads), 20 -> 26-29
//    (1); then a prefetchnta 2 KB ahead on every line (bf16_nta, 2a353cb):
//    bench_gemv_pairs gate_up shape, profiles in turn, 120 rounds,
//    1 thread 20.0 -> 21.6 GB/s, 2 threads 40.0 -> 43.0 (1, 3 and 4 KB
//    alike); in the model, decode steps in turn, tinyllama bf16 +16 % (1
//    thread) and +18 % (2), qwen2.5-0.5b bf16 +15 % and +10 %;
//  - Q8: T2 only, on one thread too: 48.5 -> 52 GB/s (2), 20-23 -> 23-28 (1);
//    then with a prefetchnta 3 KB ahead on every line too (q8_nta):
//    bench_gemv_pairs, 100 rounds, 1 thread 18.6 -> 24.2 GB/s, 2 threads
//    35.3 -> 45.9 (the nta without the T2: slower than neither; 1, 2 and
//    4 KB ahead close to 3); in the model, steps in turn, int8 +6 % and
//    +14 % (tinyllama, 1 / 2 threads), +14 % and +4 % (qwen2.5-0.5b);
//  - Q4: nta ahead, no L2 prefetch: 33-36 -> 38.5-39 GB/s (2), 18 -> 20
//    (1), at 8 KB; then 3 KB ahead instead of 8 (with two streams): decode
//    steps in turn (bench --ab-decode-prefetch), 16 int4 rows, faster in 15
//    by 0.9-7.0 % (one -0.8 %); 4 KB and 2 KB in between.
//  - two weight streams per thread for BF16 and Q4, one for Q8
//    (OwnedRanges::work_streams in owned_ranges.h): in the model, tok/s
//    with two over one, median of four back-to-back rounds per row, int4
//    1.10-1.18 (int4 + int8 lm_head 1.07-1.15), bf16 1 thread 1.04-1.07;
//    bf16 2 threads faster in all 12 of 12 alternations, by 2-14 %. Q8
//    with two: 0.96-0.99 of one (int8, medians of four rounds);
//  - then four BF16 streams (OwnedRanges::work_streams) with the nta 768
//    bytes ahead in each instead of 2 KB (about as many bytes in flight
//    per thread): decode steps in turn (bench --ab-decode-prefetch, 3
//    samples of 64 tokens), tinyllama bf16 +15 % / +9 % (1 / 2 threads),
//    qwen2.5-0.5b bf16 +10 % / +4 % (1024 bytes ahead: +10, +10, +9, +6 %;
//    four streams with 2 KB: +4, +3, +4, +4 %; 512 bytes: less); in a fast
//    minute after the change, +2.5 / +0.1 % and +9.8 / +4.6 %. Four Q4 or
//    Q8 streams were not faster: 0.94-0.96 with the same distances,
//    0.97-1.06 with Q4's nta at 1-1.5 KB (one thread) and 0.96-0.99 (two);
//    two Q8 streams with the nta: 0.98-1.03 of one.
//  - then the quantized weights interleaved with their scales in memory
//    (QuantizedWeight::interleaved, how a copied model is laid out), four
//    Q4 and Q8 streams, the nta 1.5 KB (Q4) and 1 KB (Q8) ahead, and no
//    Q8 T2 prefetch: bench_gemv_pairs (interleaved), gate_up shape, 40
//    rounds, profiles in turn, against this profile's former values on
//    the separate layout: Q4 1 thread 31.2-31.9 -> 34.2-35.3 GB/s, 2
//    threads 58.8 -> 64.0-66.1; Q8 28.6-29.0 -> 34.3-34.5, 55.8-56.5 ->
//    66.6-66.7 (Q4 nta 1 and 2 KB alike, Q8 nta 1.5 KB 33.0-33.3 and
//    63.4, 2 KB 31.3-31.6 and 61.4-62.0). (Separate-layout weights, i.e.
//    --weights mmap, read at most two streams: matmul_q_gemv_a8_multi.)
//  - then three BF16 streams instead of four, with the nta 1.5 KB ahead in
//    each instead of 768 bytes: four blocks side by side keep 32
//    accumulators, which spill; three keep 24, which do not. bench_gemv_pairs
//    --plain-quarters --profile zen5 --profile
//    zen5:bf16_streams=3,bf16_nta=1536, 30 rounds, a fast minute (probe
//    73-77 GB/s), of a plain read: gate_up shape 1 thread 0.90 -> 0.94, 2
//    threads 0.95 -> 1.00; K 896 x N 38000 (Qwen2.5's output layer's
//    shape, a quarter of its rows) 2 threads 0.90 -> 0.95. In the model,
//    decode steps in turn (bench --ab-decode-prefetch, 48-64 tokens):
//    tok/s faster in 18 of 18 runs, by 0.4-6.5 % (bf16 1 and 2 threads,
//    and int8 and int4 with their BF16 output layer); three streams with
//    768 or 1024 bytes ahead, and four with 1.5 KB, gained less or nothing.
constexpr DecodePrefetch kZen5{"zen5", 0, 1536, 0, 0, 1024, true, 1536, 0, 3, 4, 4, false};

// Intel Ice Lake-SP/-D (family 6, models 0x6A and 0x6C): four weight
// streams per thread in every GEMV and a prefetcht0 on every line (line_t0),
// 4 KB ahead for BF16 and 2 KB for Q8 (on one thread too) and Q4. Measured
// 2026-12-07 with bench_gemv_pairs (TinyLlama gate_up shape, profiles in
// turn, 30 rounds), as a share of a plain four-stream read of the same bytes:
//  - default (T2/T1 prefetches, one stream) read 0.77 (BF16), 0.64 (Q8) and
//    0.80 (Q4) on 2 threads; zen5's prefetchnta on every line 0.37 (BF16, 1
//    thread): a non-temporal prefetch costs here;
//  - four streams and no prefetch: 0.98, 0.93, 0.93 (2 threads, one run); any
//    prefetcht1 or prefetchnta added back lost (Q4: 0.54-0.79);
//  - four streams and a prefetcht0 on every line: 1.10-1.12 (BF16, 4 KB),
//    1.09-1.10 (Q8, 2 KB), 1.03-1.04 (Q4, 1.5-4 KB) on 2 threads, 1.06-1.14
//    on 1 (2 KB). One core reads only 11-13 GB/s: its misses in flight are
//    the limit, and a prefetch into L1 keeps them busy where the loop's own
//    loads, behind its arithmetic, fall behind.
// In the model, decode steps in turn: four streams without prefetch against
// default +10-29 %; then the prefetcht0 against four streams without it,
// tinyllama int4 +7 % (2 threads) and +14 % (1), qwen2.5-0.5b int4 with an
// int8 output layer +30 % and +15 %, qwen2.5-0.5b bf16 +10 % and +7 %
// (docs/performance.md).
constexpr DecodePrefetch kIcelake{"icelake", 0, 4096, 0, 0, 2048, true, 2048, 0, 4, 4, 4, true};

const DecodePrefetch* by_name(const std::string& v) {
  if (v == kDefault.name) return &kDefault;
  if (v == kZen5.name) return &kZen5;
  if (v == kIcelake.name) return &kIcelake;
  return nullptr;
}

constexpr const char* kChoices =
    "expected default, zen5 or icelake, optionally with :field=value,... (fields bf16_t2, bf16_nta, q8_t2, q8_l2, q8_nta, q8_one_thread, "
    "q4_nta, q4_l2, bf16_streams, q8_streams, q4_streams, line_t0)";

// Field `key` of d, or nullptr.
int64_t* int_field(DecodePrefetch& d, const std::string& key) {
  if (key == "bf16_t2") return &d.bf16_t2;
  if (key == "bf16_nta") return &d.bf16_nta;
  if (key == "q8_t2") return &d.q8_t2;
  if (key == "q8_l2") return &d.q8_l2;
  if (key == "q8_nta") return &d.q8_nta;
  if (key == "q4_nta") return &d.q4_nta;
  if (key == "q4_l2") return &d.q4_l2;
  return nullptr;
}

int* streams_field(DecodePrefetch& d, const std::string& key) {
  if (key == "bf16_streams") return &d.bf16_streams;
  if (key == "q8_streams") return &d.q8_streams;
  if (key == "q4_streams") return &d.q4_streams;
  return nullptr;
}

// Interned profiles built from specs: std::deque keeps addresses stable.
std::mutex g_interned_mutex;
std::deque<std::pair<std::string, DecodePrefetch>> g_interned;

std::atomic<const DecodePrefetch*> g_forced{nullptr};

// parse_decode_prefetch, its errors starting with `label` and the spec in quotes.
const DecodePrefetch& parse_spec(const char* spec, const char* label) {
  const std::string text = spec ? spec : "";
  const size_t colon = text.find(':');
  const DecodePrefetch* base = by_name(text.substr(0, colon));
  if (!base) fail(label, "\"", text, "\": ", kChoices);
  if (colon == std::string::npos) return *base;
  DecodePrefetch d = *base;
  const std::string rest = text.substr(colon + 1);
  if (rest.empty()) fail(label, "\"", text, "\": nothing after ':'; ", kChoices);
  for (size_t pos = 0; pos <= rest.size();) {
    const size_t end = std::min(rest.find(',', pos), rest.size());
    const std::string item = rest.substr(pos, end - pos);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
    char* stop = nullptr;
    const long long v = val.empty() ? -1 : std::strtoll(val.c_str(), &stop, 10);
    if (val.empty() || *stop || v < 0 || v > (int64_t(1) << 30))
      fail(label, "\"", text, "\": \"", item, "\" is not field=value with a value from 0 to 1073741824");
    if (int64_t* f = int_field(d, key)) {
      *f = v;
    } else if (key == "q8_one_thread" || key == "line_t0") {
      if (v > 1) fail(label, "\"", text, "\": \"", item, "\": ", key, " is 0 or 1");
      (key == "line_t0" ? d.line_t0 : d.q8_one_thread) = v == 1;
    } else if (int* n = streams_field(d, key)) {
      // Three streams only for BF16: its GEMV has a three-block kernel.
      const bool bf16 = key == "bf16_streams";
      if (bf16 ? v < 1 || v > 4 : v != 1 && v != 2 && v != 4)
        fail(label, "\"", text, "\": \"", item, "\": ", key, bf16 ? " is 1, 2, 3 or 4" : " is 1, 2 or 4");
      *n = int(v);
    } else {
      fail(label, "\"", text, "\": \"", item, "\": unknown field; ", kChoices);
    }
    pos = end + 1;
  }
  std::lock_guard<std::mutex> lock(g_interned_mutex);
  for (const auto& [name, p] : g_interned)
    if (name == text) return p;
  g_interned.emplace_back(text, d);
  g_interned.back().second.name = g_interned.back().first.c_str();
  return g_interned.back().second;
}
}  // namespace

const DecodePrefetch& parse_decode_prefetch(const char* spec) { return parse_spec(spec, "decode prefetch profile "); }

const DecodePrefetch& decode_prefetch_for(const CpuFeatures& cpu, const char* env) {
  if (env && *env) {
    return parse_spec(env, "RINFER_DECODE_PREFETCH=");
  }
  if (cpu.is_amd() && cpu.family >= 0x1A) return kZen5;
  if (cpu.is_intel() && cpu.family == 6 && (cpu.model == 0x6A || cpu.model == 0x6C)) return kIcelake;
  return kDefault;
}

const DecodePrefetch& decode_prefetch() {
  if (const DecodePrefetch* f = g_forced.load(std::memory_order_relaxed)) return *f;
  // Chosen once. A bad RINFER_DECODE_PREFETCH throws out of the initializer,
  // which leaves it to run again on the next call (main() calls this first).
  static const DecodePrefetch& chosen = decode_prefetch_for(cpu_features(), std::getenv("RINFER_DECODE_PREFETCH"));
  return chosen;
}

void force_decode_prefetch(const char* spec) {
  g_forced.store(spec ? &parse_decode_prefetch(spec) : nullptr, std::memory_order_relaxed);
}

}  // namespace rinfer::kernels::cpu

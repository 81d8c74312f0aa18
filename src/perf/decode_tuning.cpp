#include "perf/decode_tuning.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"

namespace rinfer::perf {

namespace {
// The measurements behind each profile: docs/performance.md, "Decode
// prefetch per CPU generation".
// Zen 4 (and the Xeon before it): the kernels' default profile
// (kernels::cpu::default_decode_prefetch).
// Zen 5 EPYC (family 0x1A): its hardware prefetcher keeps up with the BF16
// loop alone, so no T2 prefetch; a prefetchnta on every line and several
// weight streams per thread keep more misses in flight (three BF16 streams:
// four blocks' 32 accumulators spill, three blocks' 24 do not).
constexpr DecodePrefetch kZen5{"zen5", 0, 1536, 0, 0, 1024, true, 1536, 0, 3, 4, 4, false};
// Intel Ice Lake-SP/-D (family 6, models 0x6A and 0x6C): a non-temporal
// prefetch costs here, so four streams and a prefetcht0 on every line
// (line_t0): one core's misses in flight are its limit, and a prefetch into
// L1 keeps them busy where the loop's own loads fall behind.
constexpr DecodePrefetch kIcelake{"icelake", 0, 4096, 0, 0, 2048, true, 2048, 0, 4, 4, 4, true};

const DecodePrefetch* by_name(const std::string& v) {
  if (v == kernels::cpu::default_decode_prefetch().name) return &kernels::cpu::default_decode_prefetch();
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
  return kernels::cpu::default_decode_prefetch();
}

namespace {
// Chosen once. A bad RINFER_DECODE_PREFETCH throws out of the initializer,
// which leaves it to run again on the next call.
const DecodePrefetch& chosen() {
  static const DecodePrefetch& p = decode_prefetch_for(cpu_features(), std::getenv("RINFER_DECODE_PREFETCH"));
  return p;
}
}  // namespace

const DecodePrefetch& apply_decode_tuning() {
  const DecodePrefetch& p = chosen();
  kernels::cpu::set_decode_prefetch(&p);
  return p;
}

void force_decode_prefetch(const char* spec) {
  kernels::cpu::set_decode_prefetch(spec ? &parse_decode_prefetch(spec) : &chosen());
}

}  // namespace rinfer::perf

// Tokenizer throughput (MB/s of UTF-8 input, one thread) per family:
// encode of English prose, of mixed-script text, and decode; and load time.
//   build/bench/bench_tokenizer            (reads ../shared/testdata/tokenizer)
// Bytes processed are reported by Google Benchmark as bytes_per_second.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace {

using rinfer::Tokenizer;

const Tokenizer& load(const std::string& family) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[family];
  if (!t) {
    const std::string dir = std::string(RINFER_TESTDATA_DIR) + "/tokenizer/hf/" + family;
    t = Tokenizer::load(dir);
  }
  return *t;
}

// About 1 MB of English prose (varied words, punctuation, numbers).
const std::string& english() {
  static const std::string text = [] {
    const char* para =
        "The quick brown fox jumps over the lazy dog. In 1969, humans first walked on the Moon; "
        "it wasn't easy, and they'd trained for years. Tokenizers split text into pieces, and an "
        "inference engine must reproduce them exactly -- every space, comma and apostrophe counts.\n"
        "Engineers measured throughput at 12.5 MB/s, then optimized the hot loop (merges, caching) "
        "until the profiler showed nothing but hash lookups. \"Good enough,\" she said.\n";
    std::string s;
    while (s.size() < (1 << 20)) s += para;
    return s;
  }();
  return text;
}

const std::string& mixed() {
  static const std::string text = [] {
    const char* para =
        "Hello 世界! こんにちは、元気ですか？ 안녕하세요. Привет, как дела? café naïve résumé "
        "😀👍🏽👨‍👩‍👧 12345 x+y=z\tcode();\r\n";
    std::string s;
    while (s.size() < (1 << 20)) s += para;
    return s;
  }();
  return text;
}

void BM_Encode(benchmark::State& state, const std::string& family, const std::string& (*text)()) {
  const Tokenizer& tok = load(family);
  const std::string& s = text();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok.encode(s, false);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(s.size()));
  state.counters["tokens"] = double(n);
}

void BM_Decode(benchmark::State& state, const std::string& family) {
  const Tokenizer& tok = load(family);
  const auto ids = tok.encode(english(), false);
  for (auto _ : state) {
    auto text = tok.decode(ids, false);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(english().size()));
}

// Tokenizer::load of the family's directory (tokenizer.json + config):
// what every `rinfer` command pays before its first token.
void BM_Load(benchmark::State& state, const std::string& family) {
  const std::string dir = std::string(RINFER_TESTDATA_DIR) + "/tokenizer/hf/" + family;
  for (auto _ : state) {
    auto t = Tokenizer::load(dir);
    benchmark::DoNotOptimize(t.get());
  }
}

}  // namespace

#define RINFER_TOKENIZER_BENCH(family)                                                              \
  BENCHMARK_CAPTURE(BM_Encode, family##_english, #family, english)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_Encode, family##_mixed, #family, mixed)->Unit(benchmark::kMillisecond);     \
  BENCHMARK_CAPTURE(BM_Decode, family##_english, #family)->Unit(benchmark::kMillisecond);         \
  BENCHMARK_CAPTURE(BM_Load, family, #family)->Unit(benchmark::kMillisecond);

RINFER_TOKENIZER_BENCH(llama2)
RINFER_TOKENIZER_BENCH(llama3)
RINFER_TOKENIZER_BENCH(qwen3)
RINFER_TOKENIZER_BENCH(deepseek_v3)

BENCHMARK_MAIN();

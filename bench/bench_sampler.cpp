// The sampler's cost per token over a vocabulary the size of qwen2.5's
// (151936), for greedy and the usual sampling settings, on two kinds of
// logits: peaked (a few likely tokens, as a trained model gives) and flat (a
// random-weight model, or a high temperature), where top-p keeps most of the
// vocabulary. Each iteration samples from a fresh copy of the logits (the
// sampler changes them in place only with a repetition penalty).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace {

std::vector<float> make_logits(int64_t n, bool peaked) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, peaked ? 3.0f : 0.3f);
  std::vector<float> l(static_cast<size_t>(n));
  for (auto& x : l) x = d(rng);
  if (peaked)
    for (int i = 0; i < 5; ++i) l[size_t(1000 * i + 17)] = 16.0f - float(i);
  return l;
}

void BM_Sample(benchmark::State& st, bool peaked, float temperature, int top_k, float top_p) {
  const int64_t n = 151936;
  const auto logits = make_logits(n, peaked);
  rinfer::SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.seed = 1;
  rinfer::Sampler s(p);
  std::vector<float> l = logits;
  int64_t sink = 0;
  for (auto _ : st) sink += s.sample(l.data(), n, {});
  benchmark::DoNotOptimize(sink);
  st.SetItemsProcessed(st.iterations());
}

void register_all() {
  struct Setting {
    const char* name;
    float temperature;
    int top_k;
    float top_p;
  };
  for (bool peaked : {true, false})
    for (Setting c : {Setting{"greedy", 0.0f, 0, 1.0f}, Setting{"t1", 1.0f, 0, 1.0f},
                      Setting{"t0.8_topp0.95", 0.8f, 0, 0.95f}, Setting{"t0.7_topk40", 0.7f, 40, 1.0f}}) {
      const std::string name = std::string("sample/151936/") + (peaked ? "peaked/" : "flat/") + c.name;
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        BM_Sample(st, peaked, c.temperature, c.top_k, c.top_p);
      })->Unit(benchmark::kMicrosecond);
    }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

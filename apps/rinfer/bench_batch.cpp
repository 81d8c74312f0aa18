#include "bench_batch.h"

#include <chrono>
#include <cstdio>

#include "bench_report.h"
#include "core/atomic_file.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "ops/ops.h"
#include "perf/roofline.h"
#include "rinfer_git_commit.h"
#include "runtime/sampler.h"

namespace rinfer::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Sequences with their own prompts and KV blocks, decoded greedily.
class Batch {
 public:
  Batch(ModelRunner& runner, int64_t prefill_chunk) : runner_(runner), chunk_(prefill_chunk) {}
  ~Batch() { clear(); }

  void clear() {
    for (auto& q : seqs_) runner_.kv().release(q.blocks);
    seqs_.clear();
  }

  // A fixed pseudo-random prompt per sequence (its own ids), prefilled.
  void add(int64_t prompt_len, uint64_t seed) {
    Seq q;
    const int64_t V = runner_.vocab_size();
    uint64_t x = 0x2545F4914F6CDD1Dull ^ (seed * 0x9e3779b97f4a7c15ull);
    q.tokens.resize(size_t(prompt_len));
    for (auto& id : q.tokens) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      id = int32_t(3 + x % uint64_t(std::max<int64_t>(V - 3, 1)));
    }
    runner_.kv().reserve(q.blocks, prompt_len);
    logits_.resize(size_t(V));
    const int64_t chunk = chunk_ > 0 ? chunk_ : prompt_len;
    for (int64_t b = 0; b < prompt_len; b += chunk) {
      const int64_t len = std::min(chunk, prompt_len - b);
      BatchItem item{std::span<const int32_t>(q.tokens).subspan(size_t(b), size_t(len)), b, q.blocks,
                     b + len == prompt_len ? LogitRows::Last : LogitRows::None};
      runner_.forward({&item, 1}, logits_.data());
    }
    q.tokens.push_back(Sampler::argmax(logits_.data(), V));
    seqs_.push_back(std::move(q));
  }

  // One decode step of sequences [first, first + n): their last tokens in
  // one batch, each row's argmax appended.
  void step(size_t first, size_t n) {
    const int64_t V = runner_.vocab_size();
    items_.clear();
    for (size_t i = first; i < first + n; ++i) {
      Seq& q = seqs_[i];
      const int64_t pos = int64_t(q.tokens.size()) - 1;
      runner_.kv().reserve(q.blocks, pos + 1);
      items_.push_back({std::span<const int32_t>(q.tokens).subspan(size_t(pos), 1), pos, q.blocks, LogitRows::Last});
    }
    logits_.resize(n * size_t(V));
    runner_.forward(items_, logits_.data());
    for (size_t i = 0; i < n; ++i) seqs_[first + i].tokens.push_back(Sampler::argmax(logits_.data() + i * V, V));
  }

 private:
  struct Seq {
    std::vector<int32_t> tokens, blocks;
  };
  ModelRunner& runner_;
  int64_t chunk_;
  std::vector<Seq> seqs_;
  std::vector<BatchItem> items_;
  std::vector<float> logits_;
};

}  // namespace

int64_t batch_bench_kv_tokens(const BatchBenchOptions& o, int block_size) {
  const int64_t per_seq = (o.prompt_len + o.gen_len + block_size) / block_size * block_size;
  return (o.batch + 1) * per_seq;
}

int run_batch_bench(Session& s, const BatchBenchOptions& o, const std::string& model_path, const RuntimeOptions& rt) {
  const auto& cfg = s.lm.config;
  RINFER_CHECK(o.prompt_len + o.gen_len <= cfg.max_position_embeddings, "--prompt-len + --gen-len (",
               o.prompt_len + o.gen_len, ") exceeds the model's context of ", cfg.max_position_embeddings);
  RINFER_CHECK(o.gen_len >= 2, "--batch needs --gen-len >= 2 (the first token comes from the prompt)");
  ModelRunner& runner = *s.runner;
  Batch b(runner, rt.prefill_chunk);
  const size_t N = size_t(o.batch);
  const int64_t steps = o.gen_len - 1;

  // The batch's matmul path and its instruction's peak.
  kernels::cpu::QuantizedWeight qw;
  if (s.lm.quant) {
    qw.type = *s.lm.quant;
    qw.N = qw.K = cfg.hidden_size;
    qw.group_size = s.lm.group_size;
  }
  bool blocked = false;  // BF16 matrices stored blocked (the converter's default)
  for (const auto& [name, t] : s.lm.weights->tensors()) blocked |= t.dtype == DType::BF16 && t.shape.size() == 4;
  const std::string path = s.lm.quant ? kernels::cpu::matmul_q_path(o.batch, qw)
                           : blocked  ? kernels::cpu::matmul_bf16_blocked_path(o.batch)
                                      : kernels::cpu::matmul_path(o.batch, s.lm.dtype);
  perf::PeakKind kind{};
  const bool measure_peak = o.roofline && perf::peak_kind_of_path(path, kind);

  Series agg_tps, alone_tps, scaling, tpot_ms, peaks, ratio;
  double macs_per_token = 0;
  if (o.profile) profile::set_enabled(true);  // reset
  profile::set_recording(false);
  for (int i = -o.warmup; i < o.samples; ++i) {
    const bool measured = i >= 0;
    const double peak_before = measured && measure_peak ? perf::measure_peak_gops(kind, *s.pool) : 0;
    b.clear();
    for (size_t q = 0; q <= N; ++q) b.add(o.prompt_len, q);
    double t_alone = 0, t_batch = 0;
    auto run_alone = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < steps; ++k) b.step(N, 1);
      t_alone = seconds_since(t0);
    };
    auto run_batch = [&] {
      profile::set_recording(o.profile && measured);  // --profile: the batched steps only
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < steps; ++k) b.step(0, N);
      t_batch = seconds_since(t0);
      profile::set_recording(false);
    };
    if (i % 2 == 0) {
      run_alone();
      run_batch();
    } else {
      run_batch();
      run_alone();
    }
    if (!measured) continue;
    if (macs_per_token == 0) {
      // The matmul work of one batched step, per token.
      ops::reset_matmul_macs();
      b.step(0, N);
      macs_per_token = double(ops::matmul_macs()) / double(N);
    }
    agg_tps.v.push_back(double(N * size_t(steps)) / t_batch);
    alone_tps.v.push_back(double(steps) / t_alone);
    scaling.v.push_back(agg_tps.v.back() / alone_tps.v.back());
    tpot_ms.v.push_back(1e3 * t_batch / double(steps));
    if (measure_peak) {
      const double peak = std::max(peak_before, perf::measure_peak_gops(kind, *s.pool));
      peaks.v.push_back(peak);
      ratio.v.push_back(2 * macs_per_token * agg_tps.v.back() / 1e9 / peak);
    }
  }
  const profile::PhaseTotals prof[2] = {profile::totals(profile::Phase::Prefill),
                                        profile::totals(profile::Phase::Decode)};
  profile::set_enabled(false);
  b.clear();

  const auto& cpu = cpu_features();
  const double gflop_per_token = 2 * macs_per_token / 1e9;
  std::printf("model %s (%s, %s weights, %s KV cache, %d threads, %s)\n", s.lm.name.c_str(),
              cfg.architecture.c_str(), s.lm.weight_format().c_str(), kv_dtype_name(s.kv().dtype()).c_str(),
              s.pool->size(), cpu.model_name.c_str());
  std::printf("  batch %lld sequences, prompt %lld tokens each, %lld decode steps, %d samples after %d warm-up\n",
              (long long)o.batch, (long long)o.prompt_len, (long long)steps, o.samples, o.warmup);
  std::printf("  decode, batch   %10.1f ± %.1f tokens/s aggregate (step %.1f ms)\n", agg_tps.mean(), agg_tps.std(),
              tpot_ms.mean());
  std::printf("  decode, alone   %10.2f ± %.2f tokens/s\n", alone_tps.mean(), alone_tps.std());
  std::printf("  scaling         %10.2f ± %.2f x the lone sequence (same run, sample by sample)\n", scaling.mean(),
              scaling.std());
  std::printf("  matmul path     %s, %.2f GFLOP per token", path.c_str(), gflop_per_token);
  if (!peaks.v.empty())
    std::printf(" -> %.1f GFLOP/s = %.2f ± %.2f of the %s peak (%.0f, probed around each sample)",
                gflop_per_token * agg_tps.mean(), ratio.mean(), ratio.std(), perf::peak_kind_name(kind),
                peaks.mean());
  std::printf("\n");
  nlohmann::json j = {{"model", s.lm.name},
                      {"model_path", model_path},
                      {"architecture", cfg.architecture},
                      {"dtype", s.lm.weight_format()},
                      {"kv_cache_dtype", kv_dtype_name(s.kv().dtype())},
                      {"threads", s.pool->size()},
                      {"batch", o.batch},
                      {"prompt_len", o.prompt_len},
                      {"gen_len", o.gen_len},
                      {"samples", o.samples},
                      {"warmup", o.warmup},
                      {"decode_tokens_per_s_aggregate", agg_tps.mean()},
                      {"decode_tokens_per_s_aggregate_std", agg_tps.std()},
                      {"decode_tokens_per_s_alone", alone_tps.mean()},
                      {"decode_tokens_per_s_alone_std", alone_tps.std()},
                      {"batch_scaling", scaling.mean()},
                      {"batch_scaling_std", scaling.std()},
                      {"step_ms", tpot_ms.mean()},
                      {"matmul_path", path},
                      {"matmul_gflop_per_token", gflop_per_token},
                      {"sample_batch_scaling", scaling.v},
                      {"cpu", cpu.model_name},
                      {"cpu_features", cpu.summary()},
                      {"kernel_isa", kernels::cpu::active_level_name()},
                      {"rinfer_commit", RINFER_GIT_COMMIT}};
  if (!peaks.v.empty()) {
    j["peak_kind"] = perf::peak_kind_name(kind);
    j["peak_gops"] = peaks.mean();
    j["compute_peak_ratio"] = ratio.mean();
    j["compute_peak_ratio_std"] = ratio.std();
  }
  if (o.profile) j["profile"] = print_profile(prof, peaks.mean(), 0, s.pool->size());
  if (!o.json_out.empty()) write_file_atomic(o.json_out, j.dump(2) + "\n");
  return 0;
}

}  // namespace rinfer::cli

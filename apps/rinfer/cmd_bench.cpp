// rinfer bench: time to first token, prefill and decode throughput, peak RSS,
// as mean ± std over samples after a warm-up, with the decode bandwidth the
// weights demand (bytes per token × tokens/s) and the prefill matmul FLOP/s,
// each divided by its roofline (read bandwidth, instruction peak) measured in
// the same run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "core/atomic_file.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/process_stats.h"
#include "kernels/cpu/ops.h"
#include "ops/ops.h"
#include "perf/decode_tuning.h"
#include "perf/roofline.h"
#include "model/stage_profile.h"
#include "runtime/generator.h"
#include "bench_report.h"
#include "bench_batch.h"
#include "rinfer_git_commit.h"  // generated at build time (cmake/git_commit.cmake)

namespace rinfer::cli {

namespace {

// The decode GEMV of a model's float matrices: BF16 ones stored blocked
// (4-d tensors, the converter's default) take the blocked GEMV.
std::string decode_float_path(const WeightStore& w, DType float_dtype) {
  bool blocked = false;
  for (const auto& [name, t] : w.tensors()) blocked |= t.dtype == DType::BF16 && t.shape.size() == 4;
  return std::string(kernels::cpu::matmul_path(1, float_dtype)) + (blocked ? "-blocked" : "");
}

// --ab-decode-prefetch: the decode steps of every sample take the profiles in
// turn (step 1 the first, step 2 the second, ...), so that each profile meets
// the same phases of a host whose bandwidth drifts within seconds, and each
// step's time (forward pass and sampling, between two sampled tokens) goes to
// the profile it ran under. Whole bench runs per profile, back to back, met
// different phases: for one pair of profiles their ratio ranged from 0.80 to
// 1.21 over 16 rows, where steps in turn gave 1.01-1.07 (docs/performance.md).
struct PrefetchAB {
  explicit PrefetchAB(std::vector<std::string> specs_) : specs(std::move(specs_)), step_ms(specs.size()) {}
  bool on() const { return !specs.empty(); }
  void start_sample() { step = 0; }

  // Called with every sampled token: the step that just ended ran under
  // profile (step - 1) % n; the next one runs under step % n.
  void on_token() {
    const auto now = std::chrono::steady_clock::now();
    if (step > 0)
      step_ms[size_t((step - 1) % int64_t(specs.size()))].v.push_back(
          std::chrono::duration<double, std::milli>(now - last).count());
    perf::force_decode_prefetch(specs[size_t(step % int64_t(specs.size()))].c_str());
    ++step;
    last = std::chrono::steady_clock::now();
  }

  std::vector<std::string> specs;
  std::vector<Series> step_ms;  // per profile
  int64_t step = 0;             // tokens sampled in this sample so far
  std::chrono::steady_clock::time_point last;
};

}  // namespace

Runner add_bench(CLI::App& app) {
  struct Opts {
    std::string model, json_out, prompt_file;
    std::vector<std::string> ab_specs;
    int64_t prompt_len = 128, gen_len = 128;
    int samples = 5, warmup = 1;
    int64_t batch = 1;
    double mem_bw = 0;
    std::string bw_probe = "steps";
    bool roofline = true, profile = false;
    SpeculativeCli speculative;
    RuntimeOptions rt;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bench", "Measure TTFT, prefill and decode speed and memory");
  cmd->add_option("--model,-m", o->model, "rinfer model directory or Hugging Face checkpoint directory")->required();
  auto* plen = cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens (of fixed pseudo-random ids)")
                   ->check(integer_in(1));
  cmd->add_option("--prompt-file", o->prompt_file,
                  "Prompt text instead (tokenized with the model's tokenizer, BOS as it says): for speculative "
                  "decoding, whose gain depends on the text")
      ->excludes(plen);
  cmd->add_option("--gen-len", o->gen_len, "Generated tokens per sample")->check(integer_in(1));
  cmd->add_option("--batch", o->batch,
                  "Decode this many sequences together through the model runner (no server) and report aggregate "
                  "tokens/s, its ratio to one sequence alone and to the matmul instruction peak (default 1: the "
                  "single-sequence benchmark)")
      ->check(integer_in(1, 4096));
  cmd->add_option("--samples", o->samples, "Measured runs")->check(integer_in(1, INT32_MAX));
  cmd->add_option("--warmup", o->warmup, "Unmeasured runs first")->check(integer_in(0, INT32_MAX));
  cmd->add_option("--mem-bw", o->mem_bw,
                  "Memory read bandwidth in GB/s for the decode ratio (default: probed, see --bw-probe)")
      ->check(number_in(0, INFINITY, /*min_exclusive=*/true));
  cmd->add_flag("--roofline,!--no-roofline", o->roofline,
                "Probe the read bandwidth (--bw-probe) and the prefill instruction's peak (default on)");
  cmd->add_option("--bw-probe", o->bw_probe,
                  "When to probe the read bandwidth for the decode ratio: between the decode 'steps' (default: "
                  "64 MiB after each step, its time taken out of the decode time; the probe's rate over the "
                  "sample) or 'after' each sample (best of 3 reads of 512 MiB)")
      ->check(CLI::IsMember({"after", "steps"}));
  cmd->add_flag("--profile", o->profile,
                "Time each stage of the forward pass (qkv, attention, gate-up, lm-head, ...) during the samples and "
                "print where a prefill and a decode step spend their time, with each stage's read rate");
  cmd->add_option("--json", o->json_out, "Write the results as JSON to this file");
  cmd->add_option("--ab-decode-prefetch", o->ab_specs,
                  "Decode prefetch profile specs (RINFER_DECODE_PREFETCH syntax, e.g. zen5 and zen5:q4_nta=4096; "
                  "repeat, 2 or more) that the decode steps take in turn; prints each one's median step time")
      ->take_all();
  add_runtime_options(cmd, o->rt);
  add_prefill_chunk_option(cmd, o->rt);
  add_speculative_options(cmd, o->speculative);
  return [o]() -> int {
    if (o->batch > 1) {
      RINFER_CHECK(o->speculative.mode.empty(), "--batch with --speculative: not supported (bench one sequence)");
      RINFER_CHECK(o->prompt_file.empty(), "--batch uses pseudo-random prompts of --prompt-len tokens, not --prompt-file");
      RINFER_CHECK(o->ab_specs.empty(), "--batch with --ab-decode-prefetch: not supported");
      BatchBenchOptions bo;
      bo.batch = o->batch;
      bo.prompt_len = o->prompt_len;
      bo.gen_len = o->gen_len;
      bo.samples = o->samples;
      bo.warmup = o->warmup;
      bo.roofline = o->roofline;
      bo.profile = o->profile;
      bo.json_out = o->json_out;
      auto s = open_session(o->model, o->rt, /*need_tokenizer=*/false, [&](const LoadedModel&, DType) {
        return batch_bench_kv_tokens(bo, o->rt.block_size);
      });
      return run_batch_bench(*s, bo, o->model, o->rt);
    }
    std::string prompt_text;
    if (!o->prompt_file.empty()) {
      prompt_text = read_file(o->prompt_file, "--prompt-file");
      RINFER_CHECK(!prompt_text.empty(), "--prompt-file ", o->prompt_file, " is empty");
    }
    RINFER_CHECK(o->ab_specs.empty() || o->ab_specs.size() >= 2,
                 "--ab-decode-prefetch needs two or more profile specs, got one");
    for (const auto& spec : o->ab_specs) perf::parse_decode_prefetch(spec.c_str());  // a bad spec fails here
    // The KV cache is sized for the prompt, known once it is tokenized.
    if (o->rt.kv_cache_tokens == 0 && prompt_text.empty()) o->rt.kv_cache_tokens = o->prompt_len + o->gen_len;
    const bool need_tokenizer = !prompt_text.empty() || o->speculative.mode == "draft";
    auto s = open_session(o->model, o->rt, need_tokenizer, [&](const LoadedModel& lm, DType) {
      return o->rt.kv_cache_tokens > 0 ? o->rt.kv_cache_tokens : lm.config.max_position_embeddings;
    });
    const auto& cfg = s->lm.config;
    std::vector<int32_t> text_ids;
    if (!prompt_text.empty()) {
      text_ids = s->tokenizer->encode(prompt_text, /*add_special=*/true);
      o->prompt_len = int64_t(text_ids.size());
    }
    RINFER_CHECK(o->prompt_len + o->gen_len <= cfg.max_position_embeddings, "--prompt-len + --gen-len (",
                 o->prompt_len + o->gen_len, ") exceeds the model's context of ", cfg.max_position_embeddings);
    // A fixed pseudo-random prompt: the same ids for every run and machine.
    std::vector<int32_t> prompt = text_ids;
    if (prompt.empty()) {
      prompt.resize(size_t(o->prompt_len));
      uint64_t x = 0x2545F4914F6CDD1Dull;
      for (auto& id : prompt) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        id = int32_t(3 + x % uint64_t(std::max<int64_t>(cfg.vocab_size - 3, 1)));
      }
    }
    Generator gen(*s->runner);
    gen.set_prefill_chunk(o->rt.prefill_chunk);
    GenerateOptions go;
    go.max_new_tokens = o->gen_len;
    go.sampling.temperature = 0;  // greedy, no EOS stop: every sample decodes gen_len tokens
    go.speculative = o->speculative.options();
    auto draft = open_draft(o->speculative, o->rt, *s);
    if (draft) go.speculative.draft = draft->model.get();
    for (int i = 0; i < o->warmup; ++i) gen.generate(prompt, go);
    // The kernel path of the prompt's matmuls (it depends on the quant type,
    // M and the CPU, not the shape) and the peak of its instruction. A shared
    // host gives a vCPU more or less of its core from one second to the
    // next, so each sample's prefill is divided by the best of a probe just
    // before it and one just after it (at its first token, the probe's time
    // taken out of the decode time): the best of two, so that one probe
    // whose window the host took a thread from (a 2-thread probe that read
    // the 1-thread peak) cannot set it. The run's best probe is reported too.
    kernels::cpu::QuantizedWeight qw;
    if (s->lm.quant) {
      qw.type = *s->lm.quant;
      qw.N = cfg.hidden_size;
      qw.K = cfg.hidden_size;
      qw.group_size = s->lm.group_size;
    }
    const std::string prefill_path = s->lm.quant ? kernels::cpu::matmul_q_path(o->prompt_len, qw)
                                                 : kernels::cpu::matmul_path(o->prompt_len, s->lm.dtype);
    perf::PeakKind peak_kind{};
    const bool measure_peak = o->roofline && perf::peak_kind_of_path(prefill_path, peak_kind);
    auto probe_peak = [&] { return perf::measure_peak_gops(peak_kind, *s->pool); };
    double peak_best = 0, peak_after = 0;
    Series ttft, prefill_tps, prefill_s, decode_tps, rss, probe_bw, bw_ratio, sample_peak, acceptance, per_step,
        draft_share;
    const uint64_t wbytes = s->lm.model->weight_bytes_per_token();
    const bool measure_bw = o->roofline && o->mem_bw == 0;
    const bool probe_steps = measure_bw && o->bw_probe == "steps";
    profile::set_enabled(o->profile);
    PrefetchAB ab(o->ab_specs);
    // --bw-probe steps: a 64 MiB read after every decode step (4 slices in
    // turn, so a slice has left the caches by its next turn); its time is
    // taken out of the decode time, and the probe's rate over the sample is
    // the bandwidth the sample is divided by.
    std::unique_ptr<perf::ReadProbe> step_probe;
    if (probe_steps) step_probe = std::make_unique<perf::ReadProbe>(*s->pool, size_t(64) << 20, 4);
    double probe_s = 0, bw_probe_s = 0, probe_bytes = 0;  // this sample's: all probes, the read probe
    int64_t n_tokens = 0;
    std::function<void(int32_t)> on_token;
    if (ab.on() || probe_steps || measure_peak)
      on_token = [&](int32_t) {
        if (ab.on()) ab.on_token();
        const auto t0 = std::chrono::steady_clock::now();
        if (n_tokens++ == 0) {  // the first token: the prompt's forward pass has just ended
          if (measure_peak) peak_after = probe_peak();
        } else if (step_probe) {  // a decode step has just ended
          bw_probe_s += step_probe->read_slice();
          probe_bytes += double(step_probe->slice_bytes());
        }
        probe_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (ab.on()) ab.last = std::chrono::steady_clock::now();  // a probe is not part of the next step
      };
    for (int i = 0; i < o->samples; ++i) {
      const double peak_before = measure_peak ? probe_peak() : 0;
      reset_peak_rss();
      ab.start_sample();
      probe_s = bw_probe_s = probe_bytes = 0, n_tokens = 0;
      auto r = gen.generate(prompt, go, on_token);
      if (measure_peak) {
        sample_peak.v.push_back(std::max(peak_before, peak_after));
        peak_best = std::max(peak_best, sample_peak.v.back());
      }
      ttft.v.push_back(r.ttft_s * 1e3);
      prefill_tps.v.push_back(double(prompt.size()) / r.prefill_s);
      prefill_s.v.push_back(r.prefill_s);
      const double decode_tokens = double(r.output_ids.size()) - 1;
      decode_tps.v.push_back(r.n_decode_steps > 0 ? decode_tokens / (r.decode_s - probe_s) : 0);
      if (go.speculative.num_tokens > 0) {
        acceptance.v.push_back(r.n_drafted > 0 ? double(r.n_accepted) / double(r.n_drafted) : 0);
        per_step.v.push_back(r.n_decode_steps > 0 ? decode_tokens / double(r.n_decode_steps) : 0);
        draft_share.v.push_back(r.decode_s > 0 ? r.draft_s / r.decode_s : 0);
      }
      // The step probe's buffer is resident for the whole sample; it is the
      // bench's, not the model's.
      rss.v.push_back(double(peak_rss_bytes()) - double(step_probe ? step_probe->resident_bytes() : 0));
      // The machine's bandwidth drifts over seconds (shared hosts): probe it
      // right after each sample (its buffer is freed before the next one, so
      // it never shows in the RSS) or between its steps, and divide sample
      // by sample.
      if (measure_bw && r.n_decode_steps > 0) {
        probe_bw.v.push_back(probe_steps ? probe_bytes / bw_probe_s / 1e9
                                         : perf::measure_read_bandwidth_gbs(*s->pool));
        bw_ratio.v.push_back(double(wbytes) * decode_tps.v.back() / 1e9 / probe_bw.v.back());
      }
    }
    step_probe.reset();
    if (ab.on()) perf::force_decode_prefetch(nullptr);
    const profile::PhaseTotals prof[2] = {profile::totals(profile::Phase::Prefill),
                                          profile::totals(profile::Phase::Decode)};
    profile::set_enabled(false);
    // Prefill work: the multiply-adds the matmul kernels count for one prompt
    // forward pass (max_new_tokens = 1: no decode step). Attention scores are
    // not matmul kernels and not counted (a few percent at 512 tokens).
    GenerateOptions one = go;
    one.max_new_tokens = 1;
    ops::reset_matmul_macs();
    gen.generate(prompt, one);
    const double prefill_gflop = 2.0 * double(ops::matmul_macs()) / 1e9;
    const double prefill_gflops = prefill_gflop / prefill_s.mean();
    const double bw = double(wbytes) * decode_tps.mean() / 1e9;
    const auto& cpu = cpu_features();
    const std::string prefetch_name = ab.on() ? "ab" : kernels::cpu::decode_prefetch().name;
    nlohmann::json j = {
        {"model", s->lm.name},
        {"model_path", o->model},
        {"architecture", cfg.architecture},
        {"dtype", s->lm.weight_format()},
        {"kv_cache_dtype", kv_dtype_name(s->kv().dtype())},
        {"weights", o->rt.weights},
        {"threads", s->pool->size()},
        {"tp", o->rt.tp},
        {"pp", o->rt.pp},
        {"ep", o->rt.ep},
        {"prompt_len", o->prompt_len},
        {"gen_len", o->gen_len},
        {"samples", o->samples},
        {"warmup", o->warmup},
        {"ttft_ms", ttft.mean()},
        {"ttft_ms_std", ttft.std()},
        {"prefill_tokens_per_s", prefill_tps.mean()},
        {"prefill_tokens_per_s_std", prefill_tps.std()},
        {"decode_tokens_per_s", decode_tps.mean()},
        {"decode_tokens_per_s_std", decode_tps.std()},
        {"tpot_ms", decode_tps.mean() > 0 ? 1e3 / decode_tps.mean() : 0},
        {"peak_rss_bytes", rss.mean()},
        {"peak_rss_bytes_std", rss.std()},
        {"weight_bytes_per_token", wbytes},
        {"weight_bytes_total", s->lm.weights->total_bytes()},
        {"kv_cache_bytes", uint64_t(s->kv().bytes())},
        {"kv_bytes_per_token", uint64_t(s->kv().bytes_per_token())},
        {"n_layers", cfg.n_layers},
        {"peak_rss_over_weights_and_kv", rss.mean() / double(s->lm.weights->total_bytes() + s->kv().bytes())},
        {"decode_weight_bandwidth_gb_s", bw},
        {"cpu", cpu.model_name},
        {"cpu_features", cpu.summary()},
        {"kernel_isa", kernels::cpu::active_level_name()},
        {"cpu_family", cpu.family},
        {"cpu_model", cpu.model},
        {"decode_prefetch", prefetch_name},
        {"rinfer_commit", RINFER_GIT_COMMIT},
    };
    if (o->rt.pp > 1) j["pipeline_bubble_fraction"] = s->runner->pipeline_stats().bubble_fraction();
    double worst_expert_balance = 1;
    if (o->rt.ep > 1) {
      // The (token, expert) pairs each rank computed over the whole run, per MoE layer.
      nlohmann::json layers = nlohmann::json::array();
      const auto tokens = s->lm.model->expert_rank_tokens();
      for (size_t l = 0; l < tokens.size(); ++l) {
        if (tokens[l].empty()) continue;
        uint64_t sum = 0, mx = 0;
        for (uint64_t v : tokens[l]) {
          sum += v;
          mx = std::max(mx, v);
        }
        const double b = mx > 0 ? double(sum) / double(tokens[l].size()) / double(mx) : 1.0;
        worst_expert_balance = std::min(worst_expert_balance, b);
        layers.push_back({{"layer", l}, {"rank_tokens", tokens[l]}, {"balancedness", b}});
      }
      j["expert_parallel"] = {{"ranks", o->rt.ep},
                              {"tensor_parallel", o->rt.tp},
                              {"placement", !o->rt.expert_placement.empty() ? o->rt.expert_placement
                                            : o->rt.redundant_experts > 0   ? "planned from even loads"
                                                                            : "contiguous"},
                              {"redundant_experts", o->rt.redundant_experts},
                              {"layers", layers}};
      if (const ExpertRebalancer* rb = s->runner->rebalancer()) {
        j["expert_parallel"]["rebalance_every"] = rb->every();
        j["expert_parallel"]["rebalances"] = rb->rebalances();
        j["expert_parallel"]["experts_moved"] = rb->experts_moved();
      }
    }
    // The output layer's format: quantized (convert --lm-head), the float
    // dtype, or the token embeddings (tied).
    {
      const auto& ts = s->lm.weights->tensors();
      const auto head = ts.find("lm_head.weight");
      const kernels::cpu::QuantizedWeight* hq = s->lm.weights->quantized("lm_head.weight");
      j["lm_head"] = head == ts.end() ? "tied"
                     : !hq            ? std::string(dtype_user_name(head->second.dtype))
                     : hq->type == kernels::cpu::QuantType::Q8 ? "int8"
                                                               : "int4";
    }
    std::string qpaths;
    if (s->lm.quant) {
      j["quant"] = kernels::cpu::quant_type_name(qw.type);
      j["group_size"] = s->lm.group_size;
      j["float_dtype"] = std::string(dtype_user_name(s->lm.dtype));
      j["matmul_path_decode"] = kernels::cpu::matmul_q_path(1, qw);
      j["matmul_path_prefill"] = prefill_path;
      // The output layer at decode: its own quantization, else the float
      // GEMV (the blocked one where the head or the tied embeddings are
      // blocked BF16, the only 4-d matrices of a quantized model).
      const kernels::cpu::QuantizedWeight* hq = s->lm.weights->quantized("lm_head.weight");
      j["matmul_path_lm_head"] = hq ? std::string(kernels::cpu::matmul_q_path(1, *hq))
                                    : decode_float_path(*s->lm.weights, s->lm.dtype);
      qpaths = str("  matmul paths    decode ", j["matmul_path_decode"].get<std::string>(), ", prefill ",
                   j["matmul_path_prefill"].get<std::string>(), " (", j["quant"].get<std::string>(), ", group ",
                   s->lm.group_size, "), lm-head ", j["matmul_path_lm_head"].get<std::string>(), "; decode prefetch ",
                   prefetch_name, "\n");
    } else {
      j["matmul_path_decode"] = decode_float_path(*s->lm.weights, s->lm.dtype);
      j["matmul_path_prefill"] = prefill_path;
      qpaths = str("  matmul paths    decode ", j["matmul_path_decode"].get<std::string>(), ", prefill ",
                   j["matmul_path_prefill"].get<std::string>(), "; decode prefetch ", prefetch_name, "\n");
    }
    j["prefill_matmul_gflop"] = prefill_gflop;
    j["prefill_matmul_gflop_s"] = prefill_gflops;
    // Prefill against each sample's own peak (see above); the mean of the
    // samples' peaks is the figure shown with the ratio.
    std::string peak_name;
    double peak = 0, peak_ratio = 0;
    if (measure_peak && peak_best > 0) {
      peak_name = perf::peak_kind_name(peak_kind);
      Series ratio;
      for (size_t i = 0; i < sample_peak.v.size(); ++i) ratio.v.push_back(prefill_gflop / prefill_s.v[i] / sample_peak.v[i]);
      peak = sample_peak.mean(), peak_ratio = ratio.mean();
      j["peak_kind"] = peak_name;
      j["peak_gops"] = peak;
      j["peak_gops_std"] = sample_peak.std();
      j["peak_gops_best"] = peak_best;
      j["prefill_peak_ratio"] = peak_ratio;
      j["prefill_peak_ratio_std"] = ratio.std();
      j["prefill_peak_ratio_vs_best"] = prefill_gflops / peak_best;
      j["sample_peak_gops"] = sample_peak.v;
    }
    // Per sample, so that the ratios can be recomputed from the JSON.
    j["sample_prefill_s"] = prefill_s.v;
    j["sample_decode_tokens_per_s"] = decode_tps.v;
    if (go.speculative.num_tokens > 0)
      j["speculative"] = {{"method", o->speculative.mode},
                          {"num_speculative_tokens", go.speculative.num_tokens},
                          {"ngram_max", go.speculative.ngram_max},
                          {"acceptance", acceptance.mean()},
                          {"tokens_per_step", per_step.mean()}};
    if (draft)
      j["speculative"].update({{"draft_model", draft->lm.name},
                               {"draft_weight_format", draft->lm.weight_format()},
                               {"draft_time_share", draft_share.mean()}});
    if (!o->prompt_file.empty()) j["prompt_file"] = o->prompt_file;
    if (!probe_bw.v.empty()) j["sample_mem_bw_gb_s"] = probe_bw.v;
    double mem_bw = 0, bw_frac = 0;
    if (o->mem_bw > 0) {
      mem_bw = o->mem_bw, bw_frac = bw / mem_bw;
      j["mem_bw_source"] = "given";
    } else if (!probe_bw.v.empty()) {
      mem_bw = probe_bw.mean(), bw_frac = bw_ratio.mean();
      j["mem_bw_source"] = "measured";
      j["bw_probe"] = o->bw_probe;
      j["mem_bw_gb_s_std"] = probe_bw.std();
      j["decode_bandwidth_ratio_std"] = bw_ratio.std();
    }
    if (mem_bw > 0) {
      j["mem_bw_gb_s"] = mem_bw;
      j["decode_bandwidth_ratio"] = bw_frac;
    }
    std::printf("model %s (%s, %s weights, %s KV cache, %d threads, %s)\n", s->lm.name.c_str(),
                cfg.architecture.c_str(), s->lm.weight_format().c_str(), kv_dtype_name(s->kv().dtype()).c_str(),
                s->pool->size(), cpu.model_name.c_str());
    std::printf("  prompt %lld tokens, generate %lld tokens, %d samples after %d warm-up\n", (long long)o->prompt_len,
                (long long)o->gen_len, o->samples, o->warmup);
    std::printf("  TTFT            %10.1f ± %.1f ms\n", ttft.mean(), ttft.std());
    std::printf("  prefill         %10.1f ± %.1f tokens/s\n", prefill_tps.mean(), prefill_tps.std());
    std::printf("  prefill matmuls %10.1f GFLOP/s (%.1f GFLOP per prompt)", prefill_gflops, prefill_gflop);
    if (peak > 0)
      std::printf(" = %.2f of %.0f %s %s peak (probed next to each prefill; %.2f of the run's best, %.0f)", peak_ratio,
                  peak, peak_name == "int8-dot" ? "GOP/s" : "GFLOP/s", peak_name.c_str(), prefill_gflops / peak_best,
                  peak_best);
    std::printf("\n");
    std::printf("  decode          %10.2f ± %.2f tokens/s (TPOT %.1f ms)\n", decode_tps.mean(), decode_tps.std(),
                decode_tps.mean() > 0 ? 1e3 / decode_tps.mean() : 0.0);
    if (go.speculative.num_tokens > 0)
      std::printf("  speculative     %s, up to %lld drafts: %.1f %% accepted, %.2f tokens per decode step\n",
                  o->speculative.mode.c_str(), (long long)go.speculative.num_tokens, 100 * acceptance.mean(),
                  per_step.mean());
    if (draft)
      std::printf("  draft model     %s (%s): %.1f %% of the decode time\n", draft->lm.name.c_str(),
                  draft->lm.weight_format().c_str(), 100 * draft_share.mean());
    std::printf("%s", qpaths.c_str());
    if (o->rt.ep > 1)
      std::printf("  experts         %d ranks, balancedness (mean / max tokens per rank) of the worst MoE layer %.3f\n",
                  o->rt.ep, worst_expert_balance);
    if (o->rt.pp > 1)
      std::printf("  pipeline        %d stages, bubble fraction %.3f (rank 0: stage 0; the stages' busy time against "
                  "%d x the forward time)\n",
                  o->rt.pp, s->runner->pipeline_stats().bubble_fraction(), o->rt.pp);
    std::printf("  peak RSS        %10.1f MB = %.2f x (weights %.1f MB + KV cache %.1f MB)\n", rss.mean() / 1e6,
                rss.mean() / double(s->lm.weights->total_bytes() + s->kv().bytes()),
                double(s->lm.weights->total_bytes()) / 1e6, double(s->kv().bytes()) / 1e6);
    std::printf("  weights/token   %10.1f MB -> %.1f GB/s while decoding", double(wbytes) / 1e6, bw);
    if (mem_bw > 0)
      std::printf(" = %.2f of %.1f GB/s (%s)", bw_frac, mem_bw,
                  o->mem_bw > 0      ? "--mem-bw"
                  : probe_steps      ? "read between the decode steps"
                                     : "read, measured after each sample");
    std::printf("\n");
    if (ab.on()) {
      std::printf("  decode prefetch A/B, steps in turn (median ms per step, tokens/s, weight GB/s, vs the first):\n");
      nlohmann::json rows = nlohmann::json::array();
      const double first = ab.step_ms[0].median();
      for (size_t i = 0; i < ab.specs.size(); ++i) {
        const double ms = ab.step_ms[i].median();
        const double tps = ms > 0 ? 1e3 / ms : 0;
        std::printf("    %-36s %4zu steps %9.3f ms %9.2f tok/s %7.1f GB/s %6.3f\n", ab.specs[i].c_str(),
                    ab.step_ms[i].v.size(), ms, tps, double(wbytes) * tps / 1e9, ms > 0 ? first / ms : 0.0);
        rows.push_back({{"spec", ab.specs[i]},
                        {"steps", ab.step_ms[i].v.size()},
                        {"step_ms_median", ms},
                        {"tokens_per_s", tps},
                        {"weight_gb_s", double(wbytes) * tps / 1e9},
                        {"speed_vs_first", ms > 0 ? first / ms : 0.0}});
      }
      j["decode_prefetch_ab"] = rows;
    }
    if (o->profile) j["profile"] = print_profile(prof, peak, mem_bw, s->pool->size());
    if (!o->json_out.empty()) write_file_atomic(o->json_out, j.dump(2) + "\n");
    return 0;
  };
}

}  // namespace rinfer::cli

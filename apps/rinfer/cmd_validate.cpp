// rinfer validate: compare a model's logits and greedy continuations with
// trusted reference outputs (../shared/testdata/golden/<arch>).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "validate_reference.h"
#include "common.h"
#include "convert/hf_checkpoint.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "runtime/generator.h"

namespace fs = std::filesystem;

namespace rinfer::cli {

namespace {

// Default --atol per precision: about twice the largest max |dlogit| measured
// over the dense golden families (docs/validation.md).
constexpr double kInt8WeightsAtol = 0.55;  // measured max 0.27 (llama)
constexpr double kInt4WeightsAtol = 7.0;   // measured max 3.37 (llama)
constexpr double kInt8KvAtol = 0.20;       // measured max 0.097 (llama), f32 weights

std::vector<float> read_f32(const fs::path& p, size_t expect) {
  std::ifstream in(p, std::ios::binary);
  RINFER_CHECK(in, "cannot read ", p.string());
  std::vector<float> v(expect);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(expect * 4));
  RINFER_CHECK(size_t(in.gcount()) == expect * 4, p.string(), ": expected ", expect * 4, " bytes");
  return v;
}

// The scalar loop (kernels' reference), not the SIMD kernel: the judge of
// agreement stays the plainest code.
int32_t argmax(const float* x, int64_t n) { return int32_t(kernels::cpu::reference::argmax(x, n)); }

float top2_margin(const float* x, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > a) {
      b = a;
      a = x[i];
    } else if (x[i] > b) {
      b = x[i];
    }
  }
  return a - b;
}

struct RowStats {
  double max_abs = 0;
  int rows = 0, agree = 0;
  int failures = 0;  // rows whose argmax differs although the reference margin exceeds twice our error
};

// Compare one row; in exact mode every argmax must agree, otherwise only
// rows whose reference top-1 margin is larger than twice our error there.
void compare_row(const float* ours, const float* ref, int64_t n, bool exact, RowStats& st) {
  double err = 0;
  for (int64_t i = 0; i < n; ++i) err = std::max(err, double(std::fabs(ours[i] - ref[i])));
  st.max_abs = std::max(st.max_abs, err);
  ++st.rows;
  const bool same = argmax(ours, n) == argmax(ref, n);
  if (same) ++st.agree;
  if (!same && (exact || top2_margin(ref, n) > 2 * err)) ++st.failures;
}

}  // namespace

Runner add_validate(CLI::App& app) {
  struct Opts {
    std::string model, golden, json_out;
    double atol = -1;
    RuntimeOptions rt;
    ReferenceValidation ref;  // --reference mode
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("validate", "Check logits and greedy output against reference data");
  cmd->add_option("--golden", o->golden, "Golden folder: manifest.json + reference/ (+ hf/)");
  cmd->add_option("--reference", o->ref.reference,
                  "Compare --model with this reference model (e.g. its f32 conversion) on a continuation the "
                  "reference generates: top-1 agreement, mean KL, perplexity");
  cmd->add_option("--prompts", o->ref.prompts, "With --reference: JSONL of {\"ids\": [...]} or {\"text\": ...}");
  cmd->add_option("--gen-len", o->ref.gen_len, "With --reference: continuation length")->check(integer_in(1));
  cmd->add_option("--min-top1", o->ref.min_top1, "With --reference: fail below this top-1 agreement")
      ->check(number_in(0, 1));
  cmd->add_option("--max-kl", o->ref.max_kl, "With --reference: fail above this mean KL divergence")
      ->check(number_in(0, INFINITY));
  cmd->add_option("--model,-m", o->model, "Model to check (default: the golden folder's hf/)");
  cmd->add_option("--atol", o->atol,
                  "Max |logit - reference| allowed (default: manifest's f32 bound for f32 runs; else the largest of the "
                  "weights' and KV cache's: 0.15 bf16, 0.02 f16, int8 / int4 weights and int8 KV: docs/validation.md)")
      ->check(number_in(0, INFINITY, /*min_exclusive=*/true));
  cmd->add_option("--json", o->json_out, "Write per-case results to this JSON file");
  add_runtime_options(cmd, o->rt);
  add_prefill_chunk_option(cmd, o->rt);
  return [o]() -> int {
    if (!o->ref.reference.empty()) {
      if (o->model.empty()) throw CLI::RequiredError("--reference needs --model");
      // Two models side by side would need two sets of ranks.
      RINFER_CHECK(o->rt.tp == 1, "validate --reference runs in one process; --tp applies to --golden");
      o->ref.model = o->model;
      o->ref.golden = o->golden;
      o->ref.json_out = o->json_out;
      o->ref.rt = o->rt;
      return run_reference_validation(o->ref);
    }
    if (o->golden.empty()) throw CLI::RequiredError("--golden DIR (or --reference MODEL)");
    const fs::path golden(o->golden);
    RINFER_CHECK(fs::exists(golden / "manifest.json"), "no manifest.json in golden folder ", o->golden);
    const auto manifest = read_json_file((golden / "manifest.json").string());
    const std::string model = o->model.empty() ? (golden / manifest.value("checkpoint_dir", "hf")).string() : o->model;
    auto s = open_session(model, o->rt, false);
    check_weights_finite(*s, /*fatal=*/true);
    const int64_t V = s->lm.config.vocab_size;
    RINFER_CHECK(manifest.at("n_vocab").get<int64_t>() == V, "golden n_vocab ", manifest.at("n_vocab"),
                 " differs from the model's vocab_size ", V);
    const bool exact = s->lm.dtype == DType::F32 && !s->lm.quant && s->kv().dtype() == DType::F32;
    double atol = o->atol;
    if (atol <= 0) {
      if (exact) {
        atol = manifest.at("tolerance").at("f32_logits_max_abs").get<double>();
      } else {
        // The largest default of the weights' and the KV cache's precision
        // (docs/validation.md: measured on the dense golden families, x ~2).
        auto float_tol = [](DType dt) { return dt == DType::BF16 ? 0.15 : dt == DType::F16 ? 0.02 : 0.0; };
        double wt = float_tol(s->lm.dtype);
        if (s->lm.quant) wt = *s->lm.quant == kernels::cpu::QuantType::Q8 ? kInt8WeightsAtol : kInt4WeightsAtol;
        const double kt = s->kv().dtype() == DType::I8 ? kInt8KvAtol : float_tol(s->kv().dtype());
        atol = std::max(wt, kt);
      }
    }
    std::printf("validate %s against %s (weights %s, KV cache %s, %s mode, atol %.3g)\n", model.c_str(),
                o->golden.c_str(), s->lm.weight_format().c_str(), kv_dtype_name(s->kv().dtype()).c_str(),
                exact ? "exact f32" : "top-1", atol);
    Generator gen(*s->runner);
    gen.set_prefill_chunk(o->rt.prefill_chunk);
    bool all_ok = true;
    nlohmann::json report = nlohmann::json::array();
    for (const auto& p : manifest.at("prompts")) {
      const auto ids = p.at("ids").get<std::vector<int32_t>>();
      const auto greedy = p.at("greedy_ids").get<std::vector<int32_t>>();
      const auto positions = p.at("logits_positions").get<std::vector<int64_t>>();
      const auto ref_prompt = read_f32(golden / p.at("logits_file").get<std::string>(), positions.size() * V);
      const auto ref_steps = read_f32(golden / p.at("step_logits_file").get<std::string>(), greedy.size() * V);
      // Teacher-force the reference continuation: the decode path is checked
      // without depending on our own argmax.
      std::vector<float> prompt_logits, step_logits;
      std::span<const int32_t> forced(greedy.data(), greedy.size() - 1);
      gen.score(ids, forced, prompt_logits, step_logits);
      RowStats prompt_st, step_st;
      for (size_t r = 0; r < positions.size(); ++r)
        compare_row(prompt_logits.data() + positions[r] * V, ref_prompt.data() + r * V, V, exact, prompt_st);
      compare_row(prompt_logits.data() + (ids.size() - 1) * V, ref_steps.data(), V, exact, step_st);
      for (size_t t = 1; t < greedy.size(); ++t)
        compare_row(step_logits.data() + (t - 1) * V, ref_steps.data() + t * V, V, exact, step_st);
      // Free-running greedy generation.
      GenerateOptions go;
      go.max_new_tokens = int64_t(greedy.size());
      go.sampling.temperature = 0;
      auto r = gen.generate(ids, go);
      size_t same_prefix = 0;
      while (same_prefix < greedy.size() && same_prefix < r.output_ids.size() &&
             r.output_ids[same_prefix] == greedy[same_prefix])
        ++same_prefix;
      // In top-1 mode the free run may leave the reference path only at a step
      // whose reference margin is within our error.
      bool greedy_ok = same_prefix == greedy.size();
      float divergence_margin = 0;
      if (!greedy_ok) {
        divergence_margin = top2_margin(ref_steps.data() + same_prefix * V, V);
        if (!exact) greedy_ok = divergence_margin <= 2 * std::max(prompt_st.max_abs, step_st.max_abs);
      }
      const double max_abs = std::max(prompt_st.max_abs, step_st.max_abs);
      const bool ok = max_abs <= atol && prompt_st.failures == 0 && step_st.failures == 0 && greedy_ok;
      all_ok = all_ok && ok;
      std::printf("  %-8s max|dlogit| prompt %.2e steps %.2e  top-1 agree %d/%d prompt %d/%d steps  greedy %zu/%zu  %s\n",
                  p.at("name").get<std::string>().c_str(), prompt_st.max_abs, step_st.max_abs, prompt_st.agree,
                  prompt_st.rows, step_st.agree, step_st.rows, same_prefix, greedy.size(), ok ? "OK" : "FAIL");
      if (same_prefix < greedy.size())
        std::printf("           greedy left the reference at step %zu, where the reference top-1 margin is %.3g%s\n",
                    same_prefix, divergence_margin, greedy_ok ? " (within our error: allowed)" : "");
      report.push_back({{"name", p.at("name")},
                        {"prompt_max_abs", prompt_st.max_abs},
                        {"steps_max_abs", step_st.max_abs},
                        {"top1_agree", prompt_st.agree + step_st.agree},
                        {"top1_rows", prompt_st.rows + step_st.rows},
                        {"greedy_same_prefix", same_prefix},
                        {"greedy_len", greedy.size()},
                        {"ok", ok}});
    }
    if (!o->json_out.empty()) {
      write_file_atomic(o->json_out, nlohmann::json{{"model", model}, {"golden", o->golden}, {"atol", atol},
                                                    {"exact", exact}, {"cases", report}, {"ok", all_ok}}
                                         .dump(1) +
                                         "\n");
    }
    std::printf("%s\n", all_ok ? "PASS" : "FAIL");
    return all_ok ? 0 : 1;
  };
}

}  // namespace rinfer::cli

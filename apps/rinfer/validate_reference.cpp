#include "validate_reference.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "core/json_file.h"
#include "runtime/generator.h"

namespace fs = std::filesystem;

namespace rinfer::cli {

namespace {

// log-softmax of one row, in double.
void log_softmax(const float* x, int64_t n, std::vector<double>& out) {
  out.resize(size_t(n));
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, double(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lse;
}

// The scalar loop (kernels' reference), not the SIMD kernel: the judge of
// agreement stays the plainest code.
int64_t argmax(const float* x, int64_t n) { return int64_t(kernels::cpu::reference::argmax(x, n)); }

std::vector<std::vector<int32_t>> load_prompts(const ReferenceValidation& o, const Tokenizer* tok) {
  std::vector<std::vector<int32_t>> prompts;
  if (!o.golden.empty()) {
    const auto manifest = read_json_file((fs::path(o.golden) / "manifest.json").string());
    for (const auto& p : manifest.at("prompts")) prompts.push_back(p.at("ids").get<std::vector<int32_t>>());
    return prompts;
  }
  std::ifstream in(o.prompts);
  RINFER_CHECK(in, "cannot read --prompts file ", o.prompts);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = parse_json_or_discarded(line);
    RINFER_CHECK(j.is_object() && (j.contains("ids") || j.contains("text")), o.prompts, ":", n,
                 ": expected {\"ids\": [...]} or {\"text\": \"...\"}");
    if (j.contains("ids")) {
      RINFER_CHECK(j["ids"].is_array(), o.prompts, ":", n, ": \"ids\" must be a list of integers");
      prompts.push_back(j["ids"].get<std::vector<int32_t>>());
    } else {
      RINFER_CHECK(tok, "text prompts need the model's tokenizer");
      prompts.push_back(tok->encode(j["text"].get<std::string>(), /*add_special=*/true));
    }
  }
  RINFER_CHECK(!prompts.empty(), "--prompts ", o.prompts, " holds no prompts");
  return prompts;
}

}  // namespace

int run_reference_validation(const ReferenceValidation& o) {
  RINFER_CHECK(o.golden.empty() != o.prompts.empty(), "--reference needs prompts: give --golden DIR or --prompts FILE");
  auto model = open_session(o.model, o.rt, false);
  RuntimeOptions ref_rt = o.rt;
  ref_rt.dtype = "auto";  // the reference as it is: none of the model's conversion options
  ref_rt.group_size = 0;
  ref_rt.lm_head.clear();
  ref_rt.kv_cache_dtype = "auto";
  auto ref = open_session(o.reference, ref_rt, false);
  const int64_t V = model->lm.config.vocab_size;
  RINFER_CHECK(ref->lm.config.vocab_size == V, "--reference has vocab_size ", ref->lm.config.vocab_size,
               ", the model ", V);
  std::unique_ptr<Tokenizer> tok;
  if (o.golden.empty()) tok = Tokenizer::load(o.model);
  const auto prompts = load_prompts(o, tok.get());
  Generator gen_m(*model->runner), gen_r(*ref->runner);
  gen_m.set_prefill_chunk(o.rt.prefill_chunk);
  gen_r.set_prefill_chunk(o.rt.prefill_chunk);
  double kl_sum = 0, nll_m = 0, nll_r = 0;
  int64_t rows = 0, agree = 0;
  nlohmann::json cases = nlohmann::json::array();
  std::vector<double> lp_m, lp_r;
  std::vector<float> pm, sm, pr, sr;
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    const auto& ids = prompts[pi];
    GenerateOptions go;
    go.max_new_tokens = o.gen_len;
    go.sampling.temperature = 0;
    const auto cont = gen_r.generate(ids, go).output_ids;
    if (cont.empty()) continue;
    std::span<const int32_t> forced(cont.data(), cont.size() - 1);
    gen_r.score(ids, forced, pr, sr);
    gen_m.score(ids, forced, pm, sm);
    double case_kl = 0;
    int64_t case_agree = 0;
    for (size_t t = 0; t < cont.size(); ++t) {
      const float* rm = t == 0 ? pm.data() + (ids.size() - 1) * V : sm.data() + (t - 1) * V;
      const float* rr = t == 0 ? pr.data() + (ids.size() - 1) * V : sr.data() + (t - 1) * V;
      log_softmax(rm, V, lp_m);
      log_softmax(rr, V, lp_r);
      double kl = 0;
      for (int64_t i = 0; i < V; ++i) kl += std::exp(lp_r[size_t(i)]) * (lp_r[size_t(i)] - lp_m[size_t(i)]);
      case_kl += kl;
      nll_m -= lp_m[size_t(cont[t])];
      nll_r -= lp_r[size_t(cont[t])];
      if (argmax(rm, V) == argmax(rr, V)) ++case_agree;
    }
    kl_sum += case_kl;
    agree += case_agree;
    rows += int64_t(cont.size());
    std::printf("  prompt %-3zu %3zu tokens  top-1 agree %3lld/%-3zu  mean KL %.3e\n", pi + 1, cont.size(),
                (long long)case_agree, cont.size(), case_kl / double(cont.size()));
    cases.push_back({{"prompt", pi},
                     {"tokens", cont.size()},
                     {"top1_agree", case_agree},
                     {"mean_kl", case_kl / double(cont.size())}});
  }
  RINFER_CHECK(rows > 0, "the reference generated no tokens");
  const double top1 = double(agree) / double(rows), kl = kl_sum / double(rows);
  const double ppl_m = std::exp(nll_m / double(rows)), ppl_r = std::exp(nll_r / double(rows));
  const bool ok = top1 >= o.min_top1 && kl <= o.max_kl;
  std::printf("model %s vs reference %s over %lld teacher-forced tokens:\n", o.model.c_str(), o.reference.c_str(),
              (long long)rows);
  std::printf("  top-1 agreement %.4f (min %.4g)   mean KL %.4e (max %.4g)   perplexity %.4f (reference %.4f)\n", top1,
              o.min_top1, kl, o.max_kl, ppl_m, ppl_r);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  if (!o.json_out.empty())
    write_file_atomic(o.json_out, nlohmann::json{{"model", o.model},
                                                 {"reference", o.reference},
                                                 {"tokens", rows},
                                                 {"top1_agreement", top1},
                                                 {"mean_kl", kl},
                                                 {"perplexity", ppl_m},
                                                 {"reference_perplexity", ppl_r},
                                                 {"cases", cases},
                                                 {"ok", ok}}
                                          .dump(1) +
                                      "\n");
  return ok ? 0 : 1;
}

}  // namespace rinfer::cli

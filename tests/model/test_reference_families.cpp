// Families without golden logits (Qwen3, Qwen3-MoE, GLM-4-0414) checked
// against an independent reference: tests/reference/hf_forward.py, a pure
// Python (stdlib only) float64 forward pass written from the transformers
// modeling code. The reference itself is first shown to reproduce the golden
// logits of five families that share its components (rotate_half and GLM
// adjacent-pair partial RoPE, GQA, q/k/v biases, fused gate_up, softmax top-k
// routing with and without renormalization, shared experts). Then tiny f32
// synth checkpoints of each family are run through the reference and through
// rinfer (prefill + teacher-forced decode steps) and every logit must agree
// within the golden f32 bound, 1e-4.
// python3 is required: a missing interpreter fails these tests, never skips them.
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "convert/synth.h"
#include "core/thread_pool.h"
#include "runtime/generator.h"
#include "loading/model_loader.h"
#include "test_util.h"

namespace rinfer {
namespace {

namespace fs = std::filesystem;

constexpr double kAtol = 1e-4;  // the golden README's f32 bound

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t v : ids) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

// Runs the Python reference; the JSON it prints, or null after a test failure.
nlohmann::json run_reference(const fs::path& model_dir, const std::vector<int32_t>& ids) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
    ADD_FAILURE() << "python3 is required for the reference check and was not found on PATH";
    return nullptr;
  }
  const std::string script = std::string(RINFER_SOURCE_DIR) + "/tests/reference/hf_forward.py";
  const std::string cmd =
      "python3 " + test::quote(script) + " " + test::quote(model_dir.string()) + " --ids " + join_ids(ids) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "cannot run " << cmd;
    return nullptr;
  }
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << cmd << " failed:\n" << out.substr(0, 4000);
    return nullptr;
  }
  try {
    return nlohmann::json::parse(out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "reference output is not JSON (" << e.what() << "): " << out.substr(0, 2000);
    return nullptr;
  }
}

struct Comparison {
  double max_abs = 0;       // over every logit of every position
  double max_ref = 0;       // largest |reference logit|, for scale
  int64_t argmax_diff = 0;  // rows whose argmax differs
  int64_t rows = 0;
};

// rinfer logits for ids[0..n_prompt) in one prefill and the rest teacher-forced
// one token at a time, against the reference's row per position.
Comparison compare_with_rinfer(const fs::path& model_dir, const std::vector<int32_t>& ids, size_t n_prompt,
                               const nlohmann::json& ref, int threads) {
  Comparison c;
  ThreadPool pool(threads);
  LoadOptions lo;
  lo.dtype = DType::F32;
  LoadedModel lm = load_model(model_dir.string(), lo, pool);
  const int64_t V = lm.config.vocab_size;
  EXPECT_EQ(ref.at("n_vocab").get<int64_t>(), V);
  KVCacheOptions ko;
  ko.block_size = 4;
  ko.n_blocks = 32;
  ko.dtype = DType::F32;
  ModelRunner runner(*lm.model, ko, pool);
  KVCache& kv = runner.kv();
  std::vector<int32_t> hold;
  kv.reserve(hold, 5);  // the sequence's blocks are then not 0, 1, 2, ...
  Generator gen(runner);
  std::vector<float> prompt_logits, step_logits;
  gen.score(std::span<const int32_t>(ids.data(), n_prompt),
            std::span<const int32_t>(ids.data() + n_prompt, ids.size() - n_prompt), prompt_logits, step_logits);
  kv.release(hold);
  const auto& rows = ref.at("logits");
  EXPECT_EQ(rows.size(), ids.size());
  for (size_t pos = 0; pos < ids.size() && pos < rows.size(); ++pos) {
    const float* got = pos < n_prompt ? prompt_logits.data() + pos * V : step_logits.data() + (pos - n_prompt) * V;
    const auto want = rows[pos].get<std::vector<double>>();
    EXPECT_EQ(int64_t(want.size()), V);
    int64_t a_got = 0, a_want = 0;
    for (int64_t i = 0; i < V; ++i) {
      c.max_abs = std::max(c.max_abs, std::fabs(double(got[i]) - want[size_t(i)]));
      c.max_ref = std::max(c.max_ref, std::fabs(want[size_t(i)]));
      if (got[i] > got[a_got]) a_got = i;
      if (want[size_t(i)] > want[size_t(a_want)]) a_want = i;
    }
    c.argmax_diff += a_got != a_want;
    ++c.rows;
  }
  return c;
}

// --- 1. The reference reproduces the golden logits ------------------------------

void check_reference_on_golden(const std::string& folder) {
  SCOPED_TRACE(folder);
  const fs::path dir = test::testdata("golden/" + folder);
  const auto manifest = test::read_json(dir / "manifest.json");
  const double atol = manifest["tolerance"]["f32_logits_max_abs"].get<double>();
  const int64_t V = manifest["n_vocab"].get<int64_t>();
  const auto& p = manifest["prompts"][0];
  auto ids = p["ids"].get<std::vector<int32_t>>();
  const auto greedy = p["greedy_ids"].get<std::vector<int32_t>>();
  const size_t n = ids.size();
  ids.insert(ids.end(), greedy.begin(), greedy.end() - 1);  // prompt + teacher-forced continuation
  const auto ref = run_reference(dir / "hf", ids);
  ASSERT_FALSE(ref.is_null());
  const auto& rows = ref["logits"];
  ASSERT_EQ(rows.size(), ids.size());
  const auto golden_prompt = test::read_f32(dir / p["logits_file"].get<std::string>());
  const auto golden_steps = test::read_f32(dir / p["step_logits_file"].get<std::string>());
  const auto positions = p["logits_positions"].get<std::vector<size_t>>();
  ASSERT_EQ(golden_prompt.size(), positions.size() * size_t(V));
  ASSERT_EQ(golden_steps.size(), greedy.size() * size_t(V));
  double max_prompt = 0, max_steps = 0;
  for (size_t r = 0; r < positions.size(); ++r) {
    const auto row = rows[positions[r]].get<std::vector<double>>();
    for (int64_t i = 0; i < V; ++i)
      max_prompt = std::max(max_prompt, std::fabs(row[size_t(i)] - golden_prompt[r * size_t(V) + size_t(i)]));
  }
  // Step row t: logits at position n - 1 + t.
  for (size_t t = 0; t < greedy.size(); ++t) {
    const auto row = rows[n - 1 + t].get<std::vector<double>>();
    for (int64_t i = 0; i < V; ++i)
      max_steps = std::max(max_steps, std::fabs(row[size_t(i)] - golden_steps[t * size_t(V) + size_t(i)]));
  }
  EXPECT_LE(max_prompt, atol);
  EXPECT_LE(max_steps, atol);
  std::printf("[ reference ] %-14s vs golden: max |dlogit| prompt %.2e, steps %.2e (%zu positions)\n", folder.c_str(),
              max_prompt, max_steps, ids.size());
}

TEST(ReferenceForward, ReproducesGoldenLlama) { check_reference_on_golden("llama"); }
TEST(ReferenceForward, ReproducesGoldenQwen2) { check_reference_on_golden("qwen2"); }
TEST(ReferenceForward, ReproducesGoldenMixtral) { check_reference_on_golden("mixtral"); }
TEST(ReferenceForward, ReproducesGoldenQwen2Moe) { check_reference_on_golden("qwen2_moe"); }
TEST(ReferenceForward, ReproducesGoldenChatGlm4) { check_reference_on_golden("chatglm_glm4"); }

// --- 2. rinfer against the reference on families without golden logits ----------

const std::vector<int32_t> kIds = {1, 17, 250, 3, 99, 140, 42, 7, 311, 5};
constexpr size_t kPrompt = 6;  // 6 prefill positions, then 4 decode steps

fs::path synth_tiny(const test::TempDir& dir, const std::string& preset) {
  SynthOptions o;
  o.preset = preset;
  o.out = dir / preset;
  o.dtype = DType::F32;
  o.seed = 7;
  synth_checkpoint(o);
  return o.out;
}

void check_family(const std::string& preset, const std::string& arch) {
  SCOPED_TRACE(preset);
  test::TempDir dir;
  const fs::path model = synth_tiny(dir, preset);
  EXPECT_EQ(test::read_json(model / "config.json")["architectures"][0].get<std::string>(), arch);
  const auto ref = run_reference(model, kIds);
  ASSERT_FALSE(ref.is_null());
  EXPECT_EQ(ref["architecture"].get<std::string>(), arch);
  if (!ref["min_router_margin"].is_null()) {
    // f32 router scores are off by ~1e-7; a smaller gap could flip an expert.
    EXPECT_GT(ref["min_router_margin"].get<double>(), 1e-5) << "routing too close to a tie for an f32 comparison";
  }
  for (int threads : {1, 2}) {
    const Comparison c = compare_with_rinfer(model, kIds, kPrompt, ref, threads);
    EXPECT_EQ(c.rows, int64_t(kIds.size()));
    EXPECT_LE(c.max_abs, kAtol) << threads << " thread(s)";
    EXPECT_EQ(c.argmax_diff, 0) << threads << " thread(s)";
    EXPECT_GT(c.max_ref, 0.5) << "logits too small for the bound to mean much";
    std::printf("[ reference ] %-14s %d thread(s): max |dlogit| %.2e over %lld positions (max |logit| %.2f)%s\n",
                preset.c_str(), threads, c.max_abs, static_cast<long long>(c.rows), c.max_ref,
                ref["min_router_margin"].is_null()
                    ? ""
                    : (", min router margin " + std::to_string(ref["min_router_margin"].get<double>())).c_str());
  }
}

TEST(ReferenceFamilies, Qwen3MatchesReference) { check_family("qwen3-tiny", "Qwen3ForCausalLM"); }
TEST(ReferenceFamilies, Qwen3MoeMatchesReference) { check_family("qwen3-moe-tiny", "Qwen3MoeForCausalLM"); }
TEST(ReferenceFamilies, Glm4MatchesReference) { check_family("glm4-tiny", "Glm4ForCausalLM"); }

// The comparison can tell: the same GLM-4-0414 checkpoint read as
// GlmForCausalLM (no post-attention / post-MLP norms) is far from the reference.
TEST(ReferenceFamilies, Glm4WithoutPostNormsIsDetected) {
  test::TempDir dir;
  const fs::path model = synth_tiny(dir, "glm4-tiny");
  const auto ref = run_reference(model, kIds);
  ASSERT_FALSE(ref.is_null());
  auto cfg = test::read_json(model / "config.json");
  cfg["architectures"] = {"GlmForCausalLM"};
  std::ofstream(model / "config.json") << cfg.dump(2);
  const Comparison c = compare_with_rinfer(model, kIds, kPrompt, ref, 1);
  EXPECT_GT(c.max_abs, 1e-2);
  std::printf("[ reference ] glm4-tiny read as GlmForCausalLM: max |dlogit| %.2e\n", c.max_abs);
}

}  // namespace
}  // namespace rinfer

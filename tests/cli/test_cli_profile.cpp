// `rinfer bench --profile`: the per-stage tables account for the forward
// pass's work exactly (weight bytes per decode step, matmul FLOPs per
// prompt), on a dense GQA model and on a latent-attention MoE one.
#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

const json* stage(const json& phase, const std::string& name) {
  for (const auto& s : phase.at("stages"))
    if (s.at("stage") == name) return &s;
  return nullptr;
}

// Runs bench --profile on `model` (8-token prompt, 4 generated tokens, 2
// samples) and checks what holds for every model; returns the JSON.
json profile_of(const std::string& model, const TempDir& tmp) {
  const fs::path b = tmp.path / "b.json";
  CmdResult r = run_rinfer("bench --model " + quote(model) + " --prompt-len 8 --gen-len 4 --samples 2 --warmup 1 " +
                           "--threads 2 --profile --json " + quote(b.string()));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("decode profile"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prefill profile"), std::string::npos) << r.out;
  const json j = read_json(b);
  const json& p = j.at("profile");
  // The samples only (not the warm-up): one prompt and 3 decode steps each.
  EXPECT_EQ(p.at("prefill").at("forward_calls"), 2);
  EXPECT_EQ(p.at("decode").at("forward_calls"), 6);
  for (const char* phase : {"prefill", "decode"}) {
    SCOPED_TRACE(phase);
    const json& ph = p.at(phase);
    double ms = 0;
    for (const auto& s : ph.at("stages")) {
      EXPECT_GE(s.at("ms").get<double>(), 0) << s;
      EXPECT_GT(s.at("calls").get<double>(), 0) << s;
      ms += s.at("ms").get<double>();
    }
    EXPECT_NEAR(ms + ph.at("rest_ms").get<double>(), ph.at("forward_ms").get<double>(), 1e-6);
    EXPECT_GT(ph.at("forward_ms").get<double>(), 0);
    for (const char* name : {"embed", "norm", "qkv", "attention", "attn-out", "residual", "down", "lm-head"})
      EXPECT_NE(stage(ph, name), nullptr) << name;
    // On 2 threads each stage says how much of the pool's thread time it
    // kept busy: at most all of it.
    for (const auto& s : ph.at("stages")) {
      EXPECT_TRUE(s.contains("threads_busy")) << s;
      if (!s.contains("threads_busy")) continue;
      EXPECT_GT(s.at("threads_busy").get<double>(), 0) << s;
      EXPECT_LE(s.at("threads_busy").get<double>(), 1.0 + 1e-9) << s;
    }
  }
  // A decode step's norms run on the calling thread alone, no pool job:
  // exactly half of two threads' time.
  const json* norm = stage(p.at("decode"), "norm");
  EXPECT_NE(norm, nullptr);
  if (norm) {
    EXPECT_DOUBLE_EQ(norm->value("threads_busy", 0.0), 0.5);
  }
  // Every matmul of a prompt runs inside a stage: the stages' GFLOP add up
  // to what the kernels counted for the whole prompt.
  double gflop = 0;
  for (const auto& s : p.at("prefill").at("stages")) gflop += s.value("gflop", 0.0);
  EXPECT_NEAR(gflop, j.at("prefill_matmul_gflop").get<double>(), 1e-9 * j.at("prefill_matmul_gflop").get<double>());
  // A decode step's weight stages read the model's bytes per token.
  double wbytes = 0;
  for (const auto& s : p.at("decode").at("stages"))
    if (s.at("stage") != "attention") wbytes += s.value("bytes", 0.0);
  EXPECT_DOUBLE_EQ(wbytes, j.at("weight_bytes_per_token").get<double>());
  return j;
}

}  // namespace

TEST(CliProfile, GqaDenseAccountsEveryStage) {
  TempDir tmp;
  const json j = profile_of(golden_dir("llama") + "/hf", tmp);
  const json& d = j.at("profile").at("decode");
  for (const char* name : {"gate-up", "activation", "rope+kv-store"}) EXPECT_NE(stage(d, name), nullptr) << name;
  EXPECT_EQ(stage(d, "moe-router"), nullptr);
  // Attention reads the whole cached context of every layer: positions 9,
  // 10 and 11 in the three steps, 10 on average.
  ASSERT_NE(stage(d, "attention"), nullptr);
  EXPECT_DOUBLE_EQ(stage(d, "attention")->at("bytes").get<double>(), 10.0 * j.at("kv_bytes_per_token").get<double>());
  // One call of each per layer and step.
  const double layers = j.at("n_layers");
  for (const char* name : {"qkv", "attention", "gate-up", "down"}) EXPECT_EQ(stage(d, name)->at("calls"), layers);
  EXPECT_EQ(stage(d, "norm")->at("calls"), 2 * layers);
  EXPECT_EQ(stage(d, "lm-head")->at("calls"), 1);
}

TEST(CliProfile, LatentAttentionMoe) {
  TempDir tmp;
  const json j = profile_of(golden_dir("deepseek_v2") + "/hf", tmp);
  const json& d = j.at("profile").at("decode");
  EXPECT_NE(stage(d, "moe-router"), nullptr);
  EXPECT_NE(stage(d, "moe-combine"), nullptr);
  EXPECT_NE(stage(d, "gate-up"), nullptr);
}

TEST(CliProfile, PrefillChunks) {
  // --prefill-chunk 3 on an 8-token prompt: three forward calls per prompt
  // (3 + 3 + 2 tokens), and the prompt's matmul work is unchanged.
  TempDir tmp;
  const fs::path b = tmp.path / "b.json";
  const std::string base = "bench --model " + quote(golden_dir("llama") + "/hf") +
                           " --prompt-len 8 --gen-len 2 --samples 2 --warmup 0 --threads 1 --no-roofline --profile" +
                           " --json " + quote(b.string());
  ASSERT_EQ(run_rinfer(base).code, 0);
  const json whole = read_json(b);
  CmdResult r = run_rinfer(base + " --prefill-chunk 3");
  ASSERT_EQ(r.code, 0) << r.err;
  const json chunked = read_json(b);
  // One thread: nothing to share, no busy column.
  for (const auto& s : whole.at("profile").at("decode").at("stages")) EXPECT_FALSE(s.contains("threads_busy")) << s;
  EXPECT_EQ(whole.at("profile").at("prefill").at("forward_calls"), 2);
  EXPECT_EQ(chunked.at("profile").at("prefill").at("forward_calls"), 6);
  EXPECT_DOUBLE_EQ(chunked.at("prefill_matmul_gflop").get<double>(), whole.at("prefill_matmul_gflop").get<double>());
  expect_fails("bench --model " + quote(golden_dir("llama") + "/hf") + " --prefill-chunk -2", "--prefill-chunk");
  expect_fails("serve --model " + quote(golden_dir("llama") + "/hf") + " --prefill-chunk 8", "--prefill-chunk");
}

TEST(CliProfile, OffByDefault) {
  TempDir tmp;
  const fs::path b = tmp.path / "b.json";
  CmdResult r = run_rinfer("bench --model " + quote(golden_dir("llama") + "/hf") +
                           " --prompt-len 8 --gen-len 2 --samples 1 --threads 1 --no-roofline --json " +
                           quote(b.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("profile"), std::string::npos) << r.out;
  EXPECT_FALSE(read_json(b).contains("profile"));
}

}  // namespace rinfer::test::cli

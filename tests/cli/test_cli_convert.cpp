// `rinfer convert` round trips and `rinfer validate` against golden logits.
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "core/cpu_features.h"
#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

std::string convert_cmd(const std::string& hf, const fs::path& out, const std::string& dtype) {
  return "convert --hf " + quote(hf) + " --out " + quote(out.string()) + " --dtype " + dtype + " -q";
}

void convert_ok(const std::string& hf, const fs::path& out, const std::string& dtype) {
  CmdResult r = run_rinfer(convert_cmd(hf, out, dtype));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::is_directory(out));
}

// Greedy ids of every reference case on `model`, with extra run options.
void expect_reference_ids(const std::string& model, const std::string& extra) {
  const json ref = greedy_reference();  // keep it alive: the loop iterates over a part of it
  for (const auto& c : ref.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>() + " on " + model + " " + extra);
    auto want = c.at("greedy_ids").get<std::vector<int32_t>>();
    if (c.at("stopped_on_bos").get<bool>()) want.push_back(1);
    const json j = run_json("run --model " + quote(model) + " --temperature 0 --ignore-eos --json --threads 1 -n " +
                            std::to_string(want.size()) + " " + extra + " --prompt " + quote(c.at("prompt")));
    EXPECT_EQ(ids_of(j, "prompt_ids"), c.at("prompt_ids").get<std::vector<int32_t>>());
    EXPECT_EQ(ids_of(j, "output_ids"), want);
  }
}

}  // namespace

TEST(CliConvert, StoriesF32RoundTrip) {
  TempDir tmp;
  const fs::path m = tmp.path / "m";
  CmdResult r = run_rinfer(convert_cmd(stories_hf(), m, "f32"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("converted"), std::string::npos) << r.out;
  for (const char* f : {"model_desc.json", "embeddings.safetensors", "layer_000.safetensors", "layer_001.safetensors",
                        "layer_002.safetensors", "layer_003.safetensors", "layer_004.safetensors", "tokenizer.model"})
    EXPECT_TRUE(fs::is_regular_file(m / f)) << f;
  EXPECT_FALSE(fs::exists(m / "layer_005.safetensors"));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
  const json desc = read_json(m / "model_desc.json");
  EXPECT_EQ(desc.value("format", ""), "rinfer-model");
  EXPECT_EQ(desc.value("architecture", ""), "LlamaForCausalLM");
  EXPECT_EQ(desc["dtype"].value("matrix", ""), "f32");
  EXPECT_EQ(desc["config"].value("n_layers", 0), 5);

  expect_reference_ids(m.string(), "");
  // Mapping the files instead of copying them changes nothing.
  expect_reference_ids(m.string(), "--weights mmap");
}

TEST(CliConvert, MmapAndCopyGiveIdenticalIds) {
  // Sampling too (not only argmax): the logits must be bit-identical.
  TempDir tmp;
  const fs::path m = tmp.path / "m";
  convert_ok(stories_hf(), m, "f32");
  const std::string base = "run --model " + quote(m.string()) +
                           " --prompt 'Once upon a time' -n 64 --temperature 0.8 --seed 7 --json --threads 1";
  const json copy = run_json(base + " --weights copy");
  const json mmap = run_json(base + " --weights mmap");
  EXPECT_EQ(ids_of(copy, "output_ids").size(), ids_of(mmap, "output_ids").size());
  EXPECT_EQ(ids_of(copy, "output_ids"), ids_of(mmap, "output_ids"));
  EXPECT_EQ(copy.value("text", "a"), mmap.value("text", "b"));
}

TEST(CliConvert, TrailingSlashNamesTheOutputDirectory) {
  TempDir tmp;
  const fs::path m = tmp.path / "m";
  CmdResult r = run_rinfer(convert_cmd(stories_hf(), m.string() + "/", "bf16"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(m / "model_desc.json"));
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
  EXPECT_TRUE(tmp_leftovers(m).empty());
  EXPECT_EQ(read_json(m / "model_desc.json")["dtype"].value("matrix", ""), "bf16");
  // A converted directory runs as it is; --dtype only applies to HF folders.
  const json j = run_json("run --model " + quote(m.string()) + " --prompt hi -n 4 --json --threads 1");
  EXPECT_EQ(ids_of(j, "output_ids").size(), 4u);
  expect_fails("run --model " + quote(m.string()) + " --prompt hi -n 4 --dtype f32", "already converted");
}

// A pid no process has now: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

TEST(CliConvert, TemporariesOfAKilledRunAreRemovedNextTime) {
  TempDir tmp;
  const fs::path m = tmp.path / "m";
  // What a killed convert or synth leaves: its staging folder, and a file
  // written under its temporary name.
  const fs::path stale_dir = tmp.path / ("m.tmp-" + std::to_string(dead_pid()));
  const fs::path stale_file = tmp.path / ("m.tmp-" + std::to_string(dead_pid()) + "-3");
  fs::create_directory(stale_dir);
  std::ofstream(stale_dir / "model_desc.json") << "{";
  std::ofstream(stale_file) << "x";
  // Another writer's, still running (this test), and names that only look alike.
  const fs::path live = tmp.path / ("m.tmp-" + std::to_string(getpid()) + "-1");
  const fs::path other = tmp.path / ("mm.tmp-" + std::to_string(dead_pid()));
  const fs::path not_pid = tmp.path / "m.tmp-abc";
  for (const auto& p : {live, other, not_pid}) std::ofstream(p) << "x";
  CmdResult r = run_rinfer(convert_cmd(stories_hf(), m, "f32"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("removed " + stale_dir.string() + ", left by an interrupted run"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(stale_dir));
  EXPECT_FALSE(fs::exists(stale_file));
  for (const auto& p : {live, other, not_pid}) EXPECT_TRUE(fs::exists(p)) << p;
  EXPECT_TRUE(fs::is_regular_file(m / "model_desc.json"));
  // synth cleans up the same way.
  const fs::path s = tmp.path / "s", stale_synth = tmp.path / ("s.tmp-" + std::to_string(dead_pid()));
  fs::create_directory(stale_synth);
  r = run_rinfer("synth --preset tiny --out " + quote(s.string()) + " --dtype f32");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(stale_synth));
}

TEST(CliValidate, GoldenLlamaPasses) {
  CmdResult r = run_rinfer("validate --golden " + quote(golden_dir("llama")) + " --threads 1");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("exact f32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(CliValidate, ConvertedF32CopyPasses) {
  TempDir tmp;
  const fs::path m = tmp.path / "llama_f32";
  convert_ok(golden_dir("llama") + "/hf", m, "f32");
  const fs::path report = tmp.path / "report.json";
  CmdResult r = run_rinfer("validate --golden " + quote(golden_dir("llama")) + " --model " + quote(m.string()) +
                           " --threads 1 --json " + quote(report.string()));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("exact f32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("atol 0.0001"), std::string::npos) << "the manifest's f32 bound: " << r.out;
  const json rep = read_json(report);
  EXPECT_TRUE(rep.value("ok", false));
  EXPECT_TRUE(rep.value("exact", false));
  ASSERT_EQ(rep["cases"].size(), 3u);
  for (const auto& c : rep["cases"]) {
    EXPECT_TRUE(c.value("ok", false)) << c.dump();
    EXPECT_LE(c.value("prompt_max_abs", 1.0), 1e-4);
    EXPECT_EQ(c.value("greedy_same_prefix", 0), c.value("greedy_len", -1));
  }
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
}

TEST(CliValidate, ConvertedBf16CopyPassesWithDocumentedTolerance) {
  TempDir tmp;
  const fs::path m = tmp.path / "llama_bf16";
  convert_ok(golden_dir("llama") + "/hf", m, "bf16");
  CmdResult r =
      run_rinfer("validate --golden " + quote(golden_dir("llama")) + " --model " + quote(m.string()) + " --threads 1");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // docs/validation.md: bf16 weights with a bf16 KV cache, top-1 mode, atol 0.15.
  EXPECT_NE(r.out.find("weights bf16, KV cache bf16, top-1 mode, atol 0.15)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
}

// BF16 projection matrices are stored blocked by default ([N/8, K/32, 8, 32],
// layout recorded in model_desc.json; embeddings and norms are not), and
// `--bf16-layout rows` keeps [N, K]. Both validate; a wrong stored shape or an
// unknown layout name is a one-line error.
TEST(CliConvert, Bf16BlockedAndRowLayouts) {
  TempDir tmp;
  const fs::path blk = tmp.path / "blocked", rows = tmp.path / "rows";
  convert_ok(golden_dir("llama") + "/hf", blk, "bf16");
  CmdResult r = run_rinfer(convert_cmd(golden_dir("llama") + "/hf", rows, "bf16") + " --bf16-layout rows");
  ASSERT_EQ(r.code, 0) << r.err;
  const json db = read_json(blk / "model_desc.json"), dr = read_json(rows / "model_desc.json");
  const json& q = db.at("tensors").at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.at("layout"), "bf16-blocked-8x32");
  EXPECT_EQ(q.at("shape"), json::array({128, 128}));
  EXPECT_EQ(q.at("stored_shape"), json::array({16, 4, 8, 32}));
  EXPECT_FALSE(db.at("tensors").at("model.embed_tokens.weight").contains("layout"));
  EXPECT_FALSE(dr.at("tensors").at("model.layers.0.self_attn.q_proj.weight").contains("layout"));
  for (const fs::path& m : {blk, rows}) {
    r = run_rinfer("validate --golden " + quote(golden_dir("llama")) + " --model " + quote(m.string()) + " --threads 2");
    EXPECT_EQ(r.code, 0) << m << r.out << r.err;
  }
  // Tied embeddings (qwen2 golden) are blocked too: the output layer streams
  // them with the blocked GEMV and the decoder gathers token rows from tiles.
  const fs::path tied = tmp.path / "tied";
  convert_ok(golden_dir("qwen2") + "/hf", tied, "bf16");
  const json dt = read_json(tied / "model_desc.json");
  const json& e = dt.at("tensors").at("model.embed_tokens.weight");
  EXPECT_EQ(e.at("layout"), "bf16-blocked-8x32");
  EXPECT_EQ(e.at("stored_shape"), json::array({64, 4, 8, 32}));
  r = run_rinfer("validate --golden " + quote(golden_dir("qwen2")) + " --model " + quote(tied.string()) + " --threads 2");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // An unknown layout in model_desc.json.
  json bad = db;
  bad["tensors"]["model.layers.0.self_attn.q_proj.weight"]["layout"] = "bf16-tiles-4x4";
  write_bytes(blk / "model_desc.json", bad.dump());
  r = run_rinfer("run --model " + quote(blk.string()) + " --prompt-ids 1,2 -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("unsupported layout \"bf16-tiles-4x4\""), std::string::npos) << r.err;
}

TEST(CliValidate, MissingGoldenDirectory) {
  TempDir tmp;
  const std::string missing = (tmp.path / "no_such_golden").string();
  expect_fails("validate --golden " + quote(missing), missing);
  // A golden folder without manifest.json, and a file instead of a folder.
  expect_fails("validate --golden " + quote(tmp.path.string()), "manifest.json");
  write_bytes(tmp.path / "file", "x");
  expect_fails("validate --golden " + quote((tmp.path / "file").string()), "manifest.json");
  expect_fails("validate --golden " + quote(golden_dir("llama")) + " --model " + quote(missing), missing);
}

}  // namespace rinfer::test::cli

namespace rinfer::test::cli {
namespace {

// bf16 weights (and bf16 KV cache) through `rinfer validate`, in its top-1
// mode with the documented bf16 tolerance (docs/validation.md), once for each
// BF16 GEMM mode (the prompt rows go through the GEMM): "fma" keeps the
// activations f32, "dot" rounds them to BF16 for vdpbf16ps (the default on
// AMD). One MoE family per mode is left out on purpose, because BF16 rounding
// changes which expert some tokens are routed to (the golden README warns
// that these routers are not safe to compare in half precision): deepseek_v2
// goes over the tolerance with fma, qwen2_moe with dot (errors:
// docs/validation.md). Every other family passes in both.
class ValidateBf16 : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ValidateBf16, PassesWithDocumentedTolerance) {
  const auto& [family, mode] = GetParam();
  if (mode == "dot" && !rinfer::cpu_features().has_avx512_bf16())
    GTEST_SKIP() << "this CPU has no AVX-512 BF16: the dot mode is the fma mode here";
  setenv("RINFER_BF16_GEMM", mode.c_str(), 1);
  CmdResult r = run_rinfer("validate --golden " + quote(golden_dir(family)) + " --dtype bf16 --threads 1");
  unsetenv("RINFER_BF16_GEMM");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("top-1 mode, atol 0.15"), std::string::npos) << r.out;
}

std::vector<std::tuple<std::string, std::string>> bf16_cases() {
  std::vector<std::tuple<std::string, std::string>> v;
  for (const char* mode : {"fma", "dot"})
    for (const char* f : {"llama", "llama3_rope_scaling", "qwen2", "mixtral", "qwen2_moe", "baichuan_7b_rope",
                          "baichuan_13b_alibi", "chatglm_glm4", "deepseek_moe", "deepseek_v2", "deepseek_v2_lite",
                          "deepseek_v3", "deepseek_v3_grouped"}) {
      const std::string fam = f, m = mode;
      if ((m == "fma" && fam == "deepseek_v2") || (m == "dot" && fam == "qwen2_moe")) continue;  // see above
      v.emplace_back(fam, m);
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Families, ValidateBf16, ::testing::ValuesIn(bf16_cases()), [](const auto& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param);
});

}  // namespace
}  // namespace rinfer::test::cli

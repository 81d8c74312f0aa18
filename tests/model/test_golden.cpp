// Reference logits: tiny random checkpoints of each supported family must
// reproduce the trusted implementation's logits within the manifest's f32
// bound, for the prompt, for every teacher-forced decode step, and give the
// same greedy continuation.
#include <cmath>
#include <set>

#include "core/thread_pool.h"
#include "runtime/generator.h"
#include "runtime/model_loader.h"
#include "test_util.h"

namespace rinfer {
namespace {

struct GoldenCase {
  std::string folder;
  int threads;
};

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenTest, F32LogitsAndGreedyMatchReference) {
  const auto dir = test::testdata("golden/" + GetParam().folder);
  const auto manifest = test::read_json(dir / "manifest.json");
  const double atol = manifest["tolerance"]["f32_logits_max_abs"].get<double>();
  ThreadPool pool(GetParam().threads);
  LoadOptions lo;
  lo.dtype = DType::F32;
  LoadedModel lm = load_model((dir / "hf").string(), lo, pool);
  const int64_t V = lm.config.vocab_size;
  ASSERT_EQ(V, manifest["n_vocab"].get<int64_t>());
  KVCacheOptions ko;
  ko.block_size = 4;  // small blocks: every prompt spans several, in any order
  ko.n_blocks = 64;
  ko.dtype = DType::F32;
  KVCache kv(lm.model->kv_shape(), ko);
  // Take some blocks first so the sequence's blocks are not 0, 1, 2, ...
  std::vector<int32_t> hold;
  kv.reserve(hold, 12);
  Generator gen(*lm.model, kv);
  for (const auto& p : manifest["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto ids = p["ids"].get<std::vector<int32_t>>();
    const auto greedy = p["greedy_ids"].get<std::vector<int32_t>>();
    const auto positions = p["logits_positions"].get<std::vector<int64_t>>();
    const auto ref_prompt = test::read_f32(dir / p["logits_file"].get<std::string>());
    const auto ref_steps = test::read_f32(dir / p["step_logits_file"].get<std::string>());
    ASSERT_EQ(ref_prompt.size(), positions.size() * V);
    ASSERT_EQ(ref_steps.size(), greedy.size() * V);
    std::vector<float> prompt_logits, step_logits;
    gen.score(ids, std::span<const int32_t>(greedy.data(), greedy.size() - 1), prompt_logits, step_logits);
    double max_prompt = 0, max_steps = 0;
    for (size_t r = 0; r < positions.size(); ++r)
      for (int64_t i = 0; i < V; ++i)
        max_prompt = std::max(max_prompt, double(std::fabs(prompt_logits[positions[r] * V + i] - ref_prompt[r * V + i])));
    for (int64_t i = 0; i < V; ++i)
      max_steps = std::max(max_steps, double(std::fabs(prompt_logits[(ids.size() - 1) * V + i] - ref_steps[i])));
    for (size_t t = 1; t < greedy.size(); ++t)
      for (int64_t i = 0; i < V; ++i)
        max_steps = std::max(max_steps, double(std::fabs(step_logits[(t - 1) * V + i] - ref_steps[t * V + i])));
    EXPECT_LE(max_prompt, atol);
    EXPECT_LE(max_steps, atol);
    GenerateOptions go;
    go.max_new_tokens = int64_t(greedy.size());
    go.sampling.temperature = 0;
    auto r = gen.generate(ids, go);
    EXPECT_EQ(r.output_ids, greedy);
  }
  kv.release(hold);
  EXPECT_EQ(kv.n_free_blocks(), kv.n_blocks()) << "blocks leaked";
}

INSTANTIATE_TEST_SUITE_P(
    AllFamilies, GoldenTest,
    ::testing::Values(GoldenCase{"llama", 1}, GoldenCase{"llama", 2}, GoldenCase{"llama3_rope_scaling", 2},
                      GoldenCase{"qwen2", 2}, GoldenCase{"mixtral", 2}, GoldenCase{"qwen2_moe", 2},
                      GoldenCase{"baichuan_7b_rope", 2}, GoldenCase{"baichuan_13b_alibi", 2},
                      GoldenCase{"chatglm_glm4", 2}, GoldenCase{"deepseek_moe", 2}, GoldenCase{"deepseek_v2", 2},
                      GoldenCase{"deepseek_v2_lite", 1}, GoldenCase{"deepseek_v3", 2},
                      GoldenCase{"deepseek_v3_grouped", 2}),
    [](const auto& info) { return info.param.folder + "_t" + std::to_string(info.param.threads); });

// Every folder of the golden set is covered above: a new folder must be added.
TEST(GoldenSet, EveryFolderIsTested) {
  const std::set<std::string> tested = {"llama",         "llama3_rope_scaling", "qwen2",          "mixtral",
                                        "qwen2_moe",     "baichuan_7b_rope",    "baichuan_13b_alibi", "chatglm_glm4",
                                        "deepseek_moe",  "deepseek_v2",         "deepseek_v2_lite", "deepseek_v3",
                                        "deepseek_v3_grouped"};
  for (const auto& e : std::filesystem::directory_iterator(test::testdata("golden")))
    if (e.is_directory()) {
      EXPECT_TRUE(tested.count(e.path().filename().string())) << e.path();
    }
}

}  // namespace
}  // namespace rinfer

// Reference logits: tiny random checkpoints of each supported family must
// reproduce the trusted implementation's logits within the manifest's f32
// bound, for the prompt, for every teacher-forced decode step, and give the
// same greedy continuation.
#include <cmath>
#include <set>

#include "convert/converter.h"
#include "model/golden_check.h"

namespace rinfer {
namespace {

struct GoldenCase {
  std::string folder;
  int threads;
};

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenTest, F32LogitsAndGreedyMatchReference) {
  const auto dir = test::testdata("golden/" + GetParam().folder);
  test::expect_matches_golden(dir / "hf", dir, GetParam().threads);
}

// The converted rinfer directory (f32) must give the same answers as the HF one.
TEST_P(GoldenTest, ConvertedF32DirectoryMatchesReference) {
  const auto dir = test::testdata("golden/" + GetParam().folder);
  test::TempDir tmp;
  ConvertOptions co;
  co.dtype = DType::F32;
  convert_to_dir((dir / "hf").string(), tmp / "m", co);
  test::expect_matches_golden(tmp / "m", dir, GetParam().threads);
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

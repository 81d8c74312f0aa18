// Speculative decoding verifies the last token and its drafts in one
// forward pass. Up to 4 rows (3 drafts) that pass must give, row for row,
// the bits that one token per forward gives: greedy and seeded sampling
// are then exactly those of plain decoding. Checked for every golden
// architecture and stories260K, in f32, bf16, int8 and int4.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "loading/model_loader.h"
#include "runtime/model_runner.h"
#include "test_util.h"

namespace rinfer {
namespace {

struct Case {
  std::string model;  // under the test data
  std::optional<DType> dtype;
  std::optional<QuantType> quant;
};

void expect_rows_equal_single_steps(const Case& c, int threads) {
  ThreadPool pool(threads);
  LoadOptions lo;
  lo.dtype = c.dtype;
  lo.quant = c.quant;
  LoadedModel lm = load_model(test::testdata(c.model).string(), lo, pool);
  const int64_t V = lm.config.vocab_size;
  KVCacheOptions ko;
  ko.block_size = 4;  // the rows straddle blocks
  ko.n_blocks = 16;
  ko.dtype = lm.dtype;
  ModelRunner runner(*lm.model, ko, pool);
  KVCache& kv = runner.kv();
  const std::vector<int32_t> prompt = {1, 7, 8, 9, 7, 8};
  const std::vector<int32_t> next = {9, 7, 8, 10};  // the last sampled token, then three drafts
  std::vector<int32_t> blocks;
  kv.reserve(blocks, int64_t(prompt.size() + next.size()));
  std::vector<float> scratch(static_cast<size_t>(V));
  BatchItem p{prompt, 0, blocks, LogitRows::None};
  runner.forward({&p, 1}, scratch.data());
  const int64_t pos = int64_t(prompt.size());
  // One token per forward pass: the reference rows.
  std::vector<float> single(next.size() * size_t(V));
  for (size_t i = 0; i < next.size(); ++i) {
    BatchItem one{std::span<const int32_t>(next).subspan(i, 1), pos + int64_t(i), blocks, LogitRows::Last};
    runner.forward({&one, 1}, single.data() + i * size_t(V));
  }
  // All of them in one pass, as a speculative step does (it rewrites the
  // same cache slots with the same values).
  std::vector<float> rows(next.size() * size_t(V));
  BatchItem all{next, pos, blocks, LogitRows::All};
  runner.forward({&all, 1}, rows.data());
  for (size_t i = 0; i < next.size(); ++i)
    EXPECT_EQ(std::memcmp(rows.data() + i * size_t(V), single.data() + i * size_t(V), size_t(V) * sizeof(float)), 0)
        << "row " << i;
  kv.release(blocks);
}

class SpeculativeRows : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeRows, MatchOneTokenPerForwardBitForBit) {
  const std::string model = GetParam();
  for (const Case& c : {Case{model, std::nullopt, std::nullopt}, Case{model, DType::BF16, std::nullopt},
                        Case{model, std::nullopt, QuantType::Q8}, Case{model, std::nullopt, QuantType::Q4}})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(model + (c.dtype ? " bf16" : "") + (c.quant ? c.quant == QuantType::Q8 ? " int8" : " int4" : "") +
                   ", " + std::to_string(threads) + " threads");
      expect_rows_equal_single_steps(c, threads);
    }
}

INSTANTIATE_TEST_SUITE_P(Families, SpeculativeRows,
                         ::testing::Values("stories260K/hf", "golden/llama/hf", "golden/llama3_rope_scaling/hf",
                                           "golden/qwen2/hf", "golden/qwen2_moe/hf", "golden/mixtral/hf",
                                           "golden/baichuan_7b_rope/hf", "golden/baichuan_13b_alibi/hf",
                                           "golden/chatglm_glm4/hf", "golden/deepseek_moe/hf", "golden/deepseek_v2/hf",
                                           "golden/deepseek_v2_lite/hf", "golden/deepseek_v3/hf",
                                           "golden/deepseek_v3_grouped/hf"));

}  // namespace
}  // namespace rinfer

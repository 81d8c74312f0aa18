// stories260K: a real trained model. Greedy decoding must reproduce llama2.c
// run.c's reference continuation token for token, for every prompt, and its
// logits must match run.c's within 1e-4.
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/generator.h"
#include "loading/model_loader.h"
#include "test_util.h"

namespace rinfer {
namespace {

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = std::make_unique<ThreadPool>(1);  // 260K parameters: threads would only add sync cost
    lm_ = load_model(test::testdata("stories260K/hf").string(), {}, *pool_);
    KVCacheOptions ko;
    ko.n_blocks = 32;  // 512 positions
    ko.dtype = DType::F32;
    runner_ = std::make_unique<ModelRunner>(*lm_.model, ko, *pool_);
  }
  std::unique_ptr<ThreadPool> pool_;
  LoadedModel lm_;
  std::unique_ptr<ModelRunner> runner_;
};

TEST_F(Stories, GreedyMatchesRunC) {
  const auto ref = test::read_json(test::testdata("stories260K/reference/greedy_runc.json"));
  ASSERT_EQ(ref["cases"].size(), 10u);
  Generator gen(*runner_);
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    auto expect = c["greedy_ids"].get<std::vector<int32_t>>();
    const bool bos_stop = c["stopped_on_bos"].get<bool>();
    GenerateOptions go;
    go.sampling.temperature = 0;
    go.max_new_tokens = int64_t(expect.size()) + (bos_stop ? 1 : 0);
    if (bos_stop) go.stop_ids = {1};  // run.c stops when it samples BOS
    auto r = gen.generate(prompt, go);
    if (bos_stop) {
      expect.push_back(1);
      EXPECT_EQ(r.stop_reason, "eos");
    }
    EXPECT_EQ(r.output_ids, expect);
  }
}

TEST_F(Stories, LogitsMatchRunC) {
  const auto dir = test::testdata("stories260K/reference/logits");
  int files = 0;
  Generator gen(*runner_);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    SCOPED_TRACE(entry.path().filename().string());
    const auto meta = test::read_json(entry.path());
    auto logits_path = entry.path();
    logits_path.replace_extension(".f32");
    const auto ref = test::read_f32(logits_path);
    // Rows past the prompt follow the greedy path: the token fed at row r is
    // the argmax of row r - 1.
    auto fed = meta["fed_token_ids"].get<std::vector<int32_t>>();
    const auto argmax = meta["argmax"].get<std::vector<int32_t>>();
    const size_t rows = ref.size() / 512;
    ASSERT_EQ(argmax.size(), rows);
    while (fed.size() < rows) fed.push_back(argmax[fed.size() - 1]);
    // Row r is the output after feeding fed[r] at position r: run the first
    // token as the "prompt", then teacher-force the rest one at a time.
    std::vector<float> first, steps;
    gen.score(std::span<const int32_t>(fed.data(), 1), std::span<const int32_t>(fed.data() + 1, rows - 1), first,
              steps);
    double max_abs = 0;
    for (size_t i = 0; i < 512; ++i) max_abs = std::max(max_abs, double(std::fabs(first[i] - ref[i])));
    for (size_t r = 1; r < rows; ++r)
      for (size_t i = 0; i < 512; ++i)
        max_abs = std::max(max_abs, double(std::fabs(steps[(r - 1) * 512 + i] - ref[r * 512 + i])));
    EXPECT_LE(max_abs, 1e-4);
  }
  EXPECT_GE(files, 5);
}

TEST_F(Stories, PrefillEqualsTokenByToken) {
  // The whole-prompt pass and one-token-at-a-time decoding give the same logits.
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 426, 429, 270, 283, 265, 281, 329, 292, 265, 444, 30};
  Generator gen(*runner_);
  std::vector<float> batch, none, first, steps;
  gen.score(ids, {}, batch, none);
  gen.score(std::span<const int32_t>(ids.data(), 1), std::span<const int32_t>(ids.data() + 1, ids.size() - 1), first,
            steps);
  double max_abs = 0;
  for (size_t i = 0; i < 512; ++i) max_abs = std::max(max_abs, double(std::fabs(batch[i] - first[i])));
  for (size_t r = 1; r < ids.size(); ++r)
    for (size_t i = 0; i < 512; ++i)
      max_abs = std::max(max_abs, double(std::fabs(batch[r * 512 + i] - steps[(r - 1) * 512 + i])));
  // Prefill uses the blocked GEMM and decode the GEMV: they sum each dot
  // product in a different order, so f32 rounding differs (~2e-5 measured on
  // logits of magnitude ~10). The bound is the golden data's f32 bound, 15x
  // llama.cpp's own batch-vs-sequential noise and >500x below any KV bug.
  EXPECT_LE(max_abs, 1e-4);
}

TEST_F(Stories, ChunkedPrefillEqualsWholePrompt) {
  // A prompt prefilled in chunks (each attending to the cached K/V of the
  // ones before it) gives the whole-prompt pass's logits for every position,
  // and the same greedy continuation.
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 426, 429, 270, 283, 265, 281, 329, 292, 265, 444, 30};
  Generator gen(*runner_);
  EXPECT_EQ(gen.prefill_chunk(), Generator::kDefaultPrefillChunk);
  std::vector<float> whole, chunked, none;
  gen.set_prefill_chunk(0);
  gen.score(ids, {}, whole, none);
  GenerateOptions go;
  go.sampling.temperature = 0;
  go.max_new_tokens = 40;
  const auto ref = gen.generate(ids, go).output_ids;
  ASSERT_EQ(ref.size(), 40u);
  for (int64_t chunk : {1, 5, 8, 15}) {
    SCOPED_TRACE(chunk);
    gen.set_prefill_chunk(chunk);
    gen.score(ids, {}, chunked, none);
    ASSERT_EQ(chunked.size(), whole.size());
    double max_abs = 0;
    for (size_t i = 0; i < whole.size(); ++i) max_abs = std::max(max_abs, double(std::fabs(whole[i] - chunked[i])));
    // Chunks of 4 tokens or fewer take the GEMV (PrefillEqualsTokenByToken
    // says why that differs from the GEMM in f32 rounding only).
    EXPECT_LE(max_abs, 1e-4);
    EXPECT_EQ(gen.generate(ids, go).output_ids, ref);
  }
  EXPECT_THROW(gen.set_prefill_chunk(-1), Error);
}

}  // namespace
}  // namespace rinfer

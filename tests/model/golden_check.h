#pragma once
// Compare a model directory with a golden folder's reference logits: every
// prompt row and every teacher-forced decode step within the manifest's f32
// bound, and the same greedy continuation.
#include <cmath>
#include <filesystem>

#include "core/thread_pool.h"
#include "runtime/generator.h"
#include "loading/model_loader.h"
#include "test_util.h"

namespace rinfer::test {

inline void expect_matches_golden(const std::filesystem::path& model_dir, const std::filesystem::path& dir,
                                  int threads) {
  const auto manifest = read_json(dir / "manifest.json");
  const double atol = manifest["tolerance"]["f32_logits_max_abs"].get<double>();
  ThreadPool pool(threads);
  LoadOptions lo;
  // HF directories are converted in memory at f32; converted ones are what they are.
  if (!std::filesystem::exists(model_dir / "model_desc.json")) lo.dtype = DType::F32;
  LoadedModel lm = load_model(model_dir.string(), lo, pool);
  const int64_t V = lm.config.vocab_size;
  ASSERT_EQ(V, manifest["n_vocab"].get<int64_t>());
  KVCacheOptions ko;
  ko.block_size = 4;  // small blocks: every prompt spans several, in any order
  ko.n_blocks = 64;
  ko.dtype = DType::F32;
  ModelRunner runner(*lm.model, ko, pool);
  KVCache& kv = runner.kv();
  // Take some blocks first so the sequence's blocks are not 0, 1, 2, ...
  std::vector<int32_t> hold;
  kv.reserve(hold, 12);
  Generator gen(runner);
  for (const auto& p : manifest["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto ids = p["ids"].get<std::vector<int32_t>>();
    const auto greedy = p["greedy_ids"].get<std::vector<int32_t>>();
    const auto positions = p["logits_positions"].get<std::vector<int64_t>>();
    const auto ref_prompt = read_f32(dir / p["logits_file"].get<std::string>());
    const auto ref_steps = read_f32(dir / p["step_logits_file"].get<std::string>());
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

}  // namespace rinfer::test

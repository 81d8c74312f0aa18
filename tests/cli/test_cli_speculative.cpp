// `run --speculative ngram|draft`: with prompt lookup the output is the one
// plain decoding gives, greedy and seeded sampling alike, on every
// architecture, and drafts are accepted on text that repeats itself; with a
// draft model greedy output is the plain one (its sampled output keeps the
// distribution: tests/runtime/test_speculative_sampling.cpp).
#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

json run_spec(const std::string& model, const std::string& prompt_args, const std::string& extra) {
  return run_json("run --model " + quote(model) + " " + prompt_args + " --json --threads 1 --ignore-eos " + extra);
}

// A story that repeats its own phrases: prompt lookup finds them.
const char* kStory =
    "--prompt \"Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, Lily went to the park with her mom. Once upon a time, there was a little\"";

TEST(CliSpeculative, StoriesGreedyAndSampledOutputsAreThoseWithoutIt) {
  for (const std::string sampling :
       {"--temperature 0", "--temperature 0.8 --seed 7", "--temperature 1 --top-k 40 --repetition-penalty 1.2 --seed 3"}) {
    SCOPED_TRACE(sampling);
    const json plain = run_spec(stories_hf(), kStory, "-n 160 " + sampling);
    ASSERT_EQ(ids_of(plain, "output_ids").size(), 160u);
    EXPECT_EQ(plain.at("decode_steps"), 159);
    for (const std::string k : {"1", "3", "8"}) {
      SCOPED_TRACE("k = " + k);
      const json spec =
          run_spec(stories_hf(), kStory, "-n 160 " + sampling + " --speculative ngram --num-speculative-tokens " + k);
      EXPECT_EQ(ids_of(spec, "output_ids"), ids_of(plain, "output_ids"));
      const json& s = spec.at("speculative");
      EXPECT_EQ(s.at("method"), "ngram");
      EXPECT_GT(s.at("drafted").get<int64_t>(), 0);
      // Every accepted draft saved a forward pass.
      EXPECT_EQ(spec.at("decode_steps").get<int64_t>() + s.at("accepted").get<int64_t>(), 159);
    }
  }
  // Greedy decoding of this story repeats itself soon: most drafts hit.
  const json g = run_spec(stories_hf(), kStory, "-n 160 --temperature 0 --speculative ngram");
  EXPECT_GT(g.at("speculative").at("accepted").get<int64_t>(), 20);
}

// Every golden architecture (MoE, MLA, ALiBi, GLM's partial rotary...):
// one forward of the last token and its drafts gives the rows that one
// token at a time would, so greedy ids agree. The prompt repeats a pattern
// so that drafts are proposed from the first step.
class SpeculativeGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeGolden, GreedyIdsAreThoseWithoutIt) {
  const std::string model = golden_dir(GetParam()) + "/hf";
  const std::string prompt = "--prompt-ids 7,8,9,7,8,9,7,8,9";
  const json plain = run_spec(model, prompt, "-n 40 --temperature 0");
  const json spec = run_spec(model, prompt, "-n 40 --temperature 0 --speculative ngram");
  EXPECT_EQ(ids_of(spec, "output_ids"), ids_of(plain, "output_ids"));
  EXPECT_GT(spec.at("speculative").at("drafted").get<int64_t>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Families, SpeculativeGolden,
                         ::testing::Values("llama", "llama3_rope_scaling", "qwen2", "qwen2_moe", "mixtral",
                                           "baichuan_7b_rope", "baichuan_13b_alibi", "chatglm_glm4", "deepseek_moe",
                                           "deepseek_v2", "deepseek_v2_lite", "deepseek_v3", "deepseek_v3_grouped"));

// A draft model (here the model's own int4 copy, which proposes tokens the
// model does not always pick): greedy ids are still the model's own.
TEST_P(SpeculativeGolden, DraftModelGreedyIdsAreThoseWithoutIt) {
  const std::string model = golden_dir(GetParam()) + "/hf";
  const std::string prompt = "--prompt-ids 7,8,9,7,8,9,7,8,9";
  const json plain = run_spec(model, prompt, "-n 40 --temperature 0");
  const json spec = run_spec(model, prompt,
                             "-n 40 --temperature 0 --speculative draft --draft-dtype int4 --num-speculative-tokens 4 "
                             "--draft-model " + quote(model));
  EXPECT_EQ(ids_of(spec, "output_ids"), ids_of(plain, "output_ids"));
  const json& s = spec.at("speculative");
  EXPECT_EQ(s.at("method"), "draft");
  EXPECT_GT(s.at("drafted").get<int64_t>(), 0);
  EXPECT_EQ(spec.at("decode_steps").get<int64_t>() + s.at("accepted").get<int64_t>(), 39);
}

TEST(CliSpeculative, StoriesDraftModel) {
  const json plain = run_spec(stories_hf(), kStory, "-n 120 --temperature 0");
  for (const std::string k : {"1", "4"}) {
    const json spec = run_spec(stories_hf(), kStory,
                               "-n 120 --temperature 0 --speculative draft --draft-dtype int4 --draft-model " +
                                   quote(stories_hf()) + " --num-speculative-tokens " + k);
    EXPECT_EQ(ids_of(spec, "output_ids"), ids_of(plain, "output_ids")) << "k = " << k;
    // The int4 copy agrees with the model on most tokens.
    EXPECT_GT(spec.at("speculative").at("acceptance").get<double>(), 0.5);
  }
  // Sampled: a draft identical to the model is always accepted (p = q).
  const json same = run_spec(stories_hf(), kStory,
                             "-n 60 --temperature 0.9 --seed 4 --speculative draft --draft-model " + quote(stories_hf()));
  EXPECT_GT(same.at("speculative").at("acceptance").get<double>(), 0.95);
  EXPECT_EQ(ids_of(same, "output_ids").size(), 60u);
}

TEST(CliSpeculative, OptionsAreChecked) {
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --speculative draft", "--draft-model");
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --draft-model " + quote(stories_hf()),
               "--draft-model needs --speculative draft");
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --speculative ngram --draft-model " +
                   quote(stories_hf()),
               "--draft-model needs --speculative draft");
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --speculative draft --draft-dtype int3 --draft-model " +
                   quote(stories_hf()),
               "--draft-dtype");
  // A model with another tokenizer (LLaMA-2's 32000 tokens) is refused.
  TempDir tmp;
  const fs::path other = copy_checkpoint(golden_dir("llama") + "/hf", tmp.path / "other");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::remove(other / f);
    fs::copy_file(testdata("tokenizer/hf/llama2") / f, other / f);
  }
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --speculative draft --draft-model " +
                   quote(other.string()),
               "same tokenizer");
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --speculative draft --draft-model /nonexistent",
               "/nonexistent");
  // serve drafts with prompt lookup only.
  expect_fails("serve --model " + quote(stories_hf()) + " --speculative draft --draft-model " + quote(stories_hf()),
               "serve --speculative draft is not supported");
  expect_fails("serve --model " + quote(stories_hf()) + " --speculative ngram --speculative-max-batch 0",
               "--speculative-max-batch");
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --speculative ngram --num-speculative-tokens 0",
               "--num-speculative-tokens");
  expect_fails("run --model " + quote(stories_hf()) + " --prompt hi --speculative ngram --ngram-max 0", "--ngram-max");
}

}  // namespace
}  // namespace rinfer::test::cli

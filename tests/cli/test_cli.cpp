// End to end through the rinfer binary on stories260K (a real tiny LLaMA):
// greedy ids and text against llama2.c run.c, from ids and from text, JSON
// and streamed output, context limits.
#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

// run.c's greedy ids; where run.c stopped on BOS, rinfer (which stops only at
// EOS, and not at all with --ignore-eos) samples that BOS as well.
std::vector<int32_t> expected_ids(const json& c) {
  auto ids = c.at("greedy_ids").get<std::vector<int32_t>>();
  if (c.at("stopped_on_bos").get<bool>()) ids.push_back(1);
  return ids;
}

std::string greedy_args(const std::string& model, const json& c) {
  return "run --model " + quote(model) + " --temperature 0 --max-new-tokens " +
         std::to_string(expected_ids(c).size()) + " --ignore-eos --threads 1";
}

}  // namespace

TEST(CliStories, ReferenceHasTenCases) {
  const json ref = greedy_reference();
  ASSERT_EQ(ref.at("cases").size(), 10u);
  int stopped = 0;
  for (const auto& c : ref.at("cases")) stopped += c.at("stopped_on_bos").get<bool>();
  EXPECT_EQ(stopped, 1) << "the stopped_on_bos case is part of what these tests cover";
}

TEST(CliStories, GreedyFromPromptIdsMatchesRunC) {
  for (const auto& c : greedy_reference().at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    const json j = run_json(greedy_args(stories_hf(), c) + " --json --prompt-ids " + join_ids(prompt));
    EXPECT_EQ(ids_of(j, "prompt_ids"), prompt) << "--prompt-ids is used as given";
    EXPECT_EQ(ids_of(j, "output_ids"), expected_ids(c));
    EXPECT_EQ(j.value("stop_reason", ""), "length");
    EXPECT_TRUE(j.contains("text") && j["text"].is_string());
  }
}

TEST(CliStories, GreedyFromTextMatchesRunC) {
  for (const auto& c : greedy_reference().at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const json j = run_json(greedy_args(stories_hf(), c) + " --json --prompt " + quote(c.at("prompt")));
    EXPECT_EQ(ids_of(j, "prompt_ids"), c.at("prompt_ids").get<std::vector<int32_t>>());
    EXPECT_EQ(ids_of(j, "output_ids"), expected_ids(c));
    // "text" decodes output_ids like transformers' decode: the same as run.c's
    // completion, except that SentencePiece drops the leading space of the
    // first piece.
    std::string want = c.at("completion_text");
    if (!want.empty() && want[0] == ' ') want.erase(0, 1);
    EXPECT_EQ(j.value("text", ""), want);
  }
}

TEST(CliStories, StreamedTextMatchesRunC) {
  // Without --json, stdout is the prompt followed by the continuation as it
  // streams: exactly run.c's text (the prompt primes the detokenizer, so the
  // first piece keeps its space), then a newline.
  for (const auto& c : greedy_reference().at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    CmdResult r = run_rinfer(greedy_args(stories_hf(), c) + " --prompt " + quote(c.at("prompt")));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, c.at("text").get<std::string>() + "\n");
    EXPECT_NE(r.err.find(std::to_string(expected_ids(c).size()) + " generated"), std::string::npos) << r.err;
  }
}

TEST(CliStories, EmptyPromptStartsFromBosOnly) {
  const json ref = greedy_reference();
  const json* empty = nullptr;
  for (const auto& c : ref.at("cases"))
    if (c.at("prompt") == "") empty = &c;
  ASSERT_NE(empty, nullptr);
  const json j = run_json(greedy_args(stories_hf(), *empty) + " --json --prompt ''");
  EXPECT_EQ(ids_of(j, "prompt_ids"), std::vector<int32_t>{1});
  EXPECT_EQ(ids_of(j, "output_ids"), expected_ids(*empty));
  // No prompt at all is the same as an empty one.
  const json k = run_json(greedy_args(stories_hf(), *empty) + " --json");
  EXPECT_EQ(ids_of(k, "prompt_ids"), std::vector<int32_t>{1});
  EXPECT_EQ(ids_of(k, "output_ids"), expected_ids(*empty));
}

TEST(CliStories, ThreadCountDoesNotChangeGreedyIds) {
  const json c = greedy_reference().at("cases").at(0);
  const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
  const auto want = expected_ids(c);
  // --threads 0: all hardware threads.
  const json j = run_json("run --model " + quote(stories_hf()) + " --temperature 0 -n 24 --ignore-eos --json --threads 0" +
                          " --prompt-ids " + join_ids(prompt));
  EXPECT_EQ(ids_of(j, "output_ids"), std::vector<int32_t>(want.begin(), want.begin() + 24));
}

TEST(CliStories, MaxModelLenLimitsPromptPlusOutput) {
  const json c = greedy_reference().at("cases").at(0);  // 5 prompt ids
  const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
  ASSERT_EQ(prompt.size(), 5u);
  const auto want = expected_ids(c);
  const json j = run_json("run --model " + quote(stories_hf()) + " --temperature 0 -n 100 --ignore-eos --json" +
                          " --threads 1 --max-model-len 8 --prompt-ids " + join_ids(prompt));
  EXPECT_EQ(ids_of(j, "output_ids"), std::vector<int32_t>(want.begin(), want.begin() + 3));
  EXPECT_EQ(j.value("stop_reason", ""), "context");
}

TEST(CliStories, PromptFillingTheContextGeneratesNothing) {
  // stories260K has 512 positions: a 512-id prompt fits, but no new token does.
  std::vector<int32_t> prompt(512, 300);
  prompt[0] = 1;
  const json j = run_json("run --model " + quote(stories_hf()) + " --temperature 0 -n 4 --json --threads 1" +
                          " --prompt-ids " + join_ids(prompt));
  EXPECT_EQ(ids_of(j, "prompt_ids").size(), 512u);
  EXPECT_TRUE(ids_of(j, "output_ids").empty());
  EXPECT_EQ(j.value("stop_reason", ""), "context");
}

TEST(CliStories, MaxNewTokensZeroGeneratesNothing) {
  const json j = run_json("run --model " + quote(stories_hf()) + " --prompt hi -n 0 --json --threads 1");
  EXPECT_FALSE(ids_of(j, "prompt_ids").empty());
  EXPECT_TRUE(ids_of(j, "output_ids").empty());
  EXPECT_EQ(j.value("text", "?"), "");
}

}  // namespace rinfer::test::cli

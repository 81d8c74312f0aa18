// tokenizer.json back-end against Hugging Face reference outputs:
// ../shared/testdata/tokenizer/hf/<family>/cases.jsonl (ids without and with
// special tokens, decode with skip_special_tokens=False), exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using Ids = std::vector<int32_t>;

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

class HfCases : public ::testing::TestWithParam<std::string> {};

TEST_P(HfCases, IdsAndDecodeMatchTransformers) {
  const auto dir = test::testdata("tokenizer/hf/" + GetParam());
  const auto tok = Tokenizer::load(dir.string());
  const auto cases = read_jsonl(dir / "cases.jsonl");
  ASSERT_EQ(cases.size(), 87u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string text = c.at("text").get<std::string>();
    const Ids want = c.at("ids").get<Ids>();
    const Ids want_special = c.at("ids_with_special").get<Ids>();
    const std::string want_decoded = c.at("decoded").get<std::string>();
    const Ids got = tok->encode(text, false);
    const Ids got_special = tok->encode(text, true);
    const std::string got_decoded = tok->decode(want, /*skip_special=*/false);
    EXPECT_EQ(got, want) << "case " << i << ": " << c.at("text").dump();
    EXPECT_EQ(got_special, want_special) << "case " << i << ": " << c.at("text").dump();
    EXPECT_EQ(got_decoded, want_decoded) << "case " << i << ": " << c.at("text").dump();
    failures += (got != want) + (got_special != want_special) + (got_decoded != want_decoded);
  }
  EXPECT_EQ(failures, 0);
}

// Streaming the reference ids gives exactly decode(ids), never a broken
// character on the way.
TEST_P(HfCases, StreamingDetokenizerMatchesDecode) {
  const auto dir = test::testdata("tokenizer/hf/" + GetParam());
  const auto tok = Tokenizer::load(dir.string());
  for (const auto& c : read_jsonl(dir / "cases.jsonl")) {
    const Ids ids = c.at("ids").get<Ids>();
    StreamingDetokenizer sd(*tok, /*skip_special=*/false);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = sd.push(id);
      EXPECT_EQ(utf8::find_invalid(piece), std::string::npos);
      streamed += piece;
    }
    streamed += sd.flush();
    EXPECT_EQ(streamed, tok->decode(ids, false)) << c.at("text").dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfCases, ::testing::Values("llama2", "llama3", "qwen3", "deepseek_v3"));

// The directory holds only tokenizer.json (and its config): load() must
// pick it, and naming the file directly must give the same tokenizer.
TEST(HfTokenizerJson, LoadByFileOrDirectory) {
  const auto dir = test::testdata("tokenizer/hf/qwen3");
  const auto a = Tokenizer::load(dir.string());
  const auto b = Tokenizer::load((dir / "tokenizer.json").string());
  EXPECT_EQ(a->encode("<|im_start|>user hi", false), b->encode("<|im_start|>user hi", false));
  EXPECT_EQ(a->vocab_size(), 151669);
  EXPECT_EQ(a->eos_id(), 151645);  // <|im_end|>
  EXPECT_EQ(a->bos_id(), -1);
  EXPECT_TRUE(a->is_special(151644));
  EXPECT_FALSE(a->is_special(151667));  // <think> is a normal added token
}

TEST(HfTokenizerJson, ParseSpecialSwitch) {
  const auto tok = Tokenizer::load(test::testdata("tokenizer/hf/qwen3").string());
  EXPECT_EQ(tok->encode("<|im_start|>", false), (Ids{151644}));
  const Ids literal = tok->encode_no_parse_special("<|im_start|>", false);
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(tok->decode(literal, false), "<|im_start|>");
  // <think> is not special: it is matched either way.
  EXPECT_EQ(tok->encode_no_parse_special("<think>", false), (Ids{151667}));
}

TEST(HfTokenizerJson, SkipSpecialOnDecode) {
  const auto tok = Tokenizer::load(test::testdata("tokenizer/hf/llama3").string());
  const Ids ids = tok->encode("<|begin_of_text|>Hello", false);
  ASSERT_EQ(ids.front(), 128000);
  EXPECT_EQ(tok->decode(ids, true), "Hello");
  EXPECT_EQ(tok->decode(ids, false), "<|begin_of_text|>Hello");
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128001);
}

}  // namespace
}  // namespace rinfer

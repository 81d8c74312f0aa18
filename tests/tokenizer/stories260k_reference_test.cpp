// The tok512 SentencePiece tokenizer of stories260K against the references in
// shared/testdata/stories260K/reference (see its README.md).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using test::read_json;
using test::testdata;

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

class Stories260K : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = Tokenizer::load(test::stories_hf().string()).release(); }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static const Tokenizer& tok() { return *tok_; }
  static Tokenizer* tok_;
};
Tokenizer* Stories260K::tok_ = nullptr;

TEST_F(Stories260K, VocabularyAndSpecialTokens) {
  EXPECT_EQ(tok().vocab_size(), 512);
  EXPECT_EQ(tok().bos_id(), 1);
  EXPECT_EQ(tok().eos_id(), 2);
  EXPECT_EQ(tok().eos_ids(), std::vector<int32_t>{2});  // config.json and generation_config.json agree
  EXPECT_TRUE(tok().is_eos(2));
  EXPECT_FALSE(tok().is_eos(1));
  for (int32_t id : {0, 1, 2}) EXPECT_TRUE(tok().is_special(id)) << id;
  for (int32_t id : {3, 13, 258, 259, 410, 511, -1, 512}) EXPECT_FALSE(tok().is_special(id)) << id;
  EXPECT_EQ(tok().id_to_piece(0), "<unk>");
  EXPECT_EQ(tok().id_to_piece(1), "<s>");
  EXPECT_EQ(tok().id_to_piece(2), "</s>");
  EXPECT_EQ(tok().id_to_piece(13), "<0x0A>");
  EXPECT_EQ(tok().id_to_piece(259), "\xE2\x96\x81t");  // "▁t", as the README says
  EXPECT_EQ(tok().id_to_piece(403), "\xE2\x96\x81Once");
  EXPECT_EQ(tok().id_to_piece(410), "\xE2\x96\x81");
}

// run.c's prompt ids. None of the ten prompts has leading, trailing or
// repeated spaces, the only place where run.c and SentencePiece (hence
// transformers) differ, so every case must match.
TEST_F(Stories260K, PromptIdsMatchRunC) {
  const auto ref = read_json(testdata("stories260K/reference/greedy_runc.json"));
  ASSERT_EQ(ref["cases"].size(), 10u);
  for (const auto& c : ref["cases"]) {
    const std::string prompt = c["prompt"];
    EXPECT_EQ(tok().encode(prompt, true), ids_of(c["prompt_ids"])) << c["name"];
    // Without special tokens: the same minus the leading BOS.
    auto no_bos = ids_of(c["prompt_ids"]);
    no_bos.erase(no_bos.begin());
    EXPECT_EQ(tok().encode(prompt, false), no_bos) << c["name"];
  }
}

// llama.cpp's own tokenizer gave the same prompt ids (README). Its
// llama-simple prints "<s>" and keeps the space of the piece after it, which
// is what decode(skip_special=false) gives; it continues past a sampled BOS,
// so its output only starts with ours.
TEST_F(Stories260K, MatchesLlamaCpp) {
  const auto ref = read_json(testdata("stories260K/reference/greedy_llamacpp.json"));
  ASSERT_EQ(ref["cases"].size(), 10u);
  for (const auto& c : ref["cases"]) {
    EXPECT_EQ(tok().encode(c["prompt"].get<std::string>(), true), ids_of(c["prompt_ids_llamacpp_tokenizer"]))
        << c["name"];
    auto ids = ids_of(c["prompt_ids"]);
    for (int32_t id : ids_of(c["greedy_ids"])) ids.push_back(id);
    const std::string out = c["llama_simple_stdout"];
    EXPECT_TRUE(out.starts_with(tok().decode(ids, /*skip_special=*/false))) << c["name"];
  }
}

// `text` is run.c's prompt echo + continuation: the piece after BOS loses its
// leading space and <0xXX> pieces become raw bytes, which is what
// SentencePiece decoding of the whole id list gives as well.
TEST_F(Stories260K, DecodeReproducesReferenceText) {
  const auto ref = read_json(testdata("stories260K/reference/greedy_runc.json"));
  for (const auto& c : ref["cases"]) {
    auto ids = ids_of(c["prompt_ids"]);
    for (int32_t id : ids_of(c["greedy_ids"])) ids.push_back(id);
    const std::string text = c["text"];
    EXPECT_EQ(tok().decode(ids), text) << c["name"];
    EXPECT_EQ(tok().decode(ids, /*skip_special=*/false), "<s> " + text) << c["name"];
    EXPECT_TRUE(text.starts_with(c["prompt"].get<std::string>())) << c["name"];
  }
}

// The CLI primes the detokenizer with the prompt and prints only what the
// generated ids add: that must be run.c's completion text exactly.
TEST_F(Stories260K, StreamingAfterPromptGivesCompletionText) {
  const auto ref = read_json(testdata("stories260K/reference/greedy_runc.json"));
  for (const auto& c : ref["cases"]) {
    StreamingDetokenizer detok(tok());
    std::string prompt_text;
    for (int32_t id : ids_of(c["prompt_ids"])) prompt_text += detok.push(id);
    std::string completion;
    for (int32_t id : ids_of(c["greedy_ids"])) completion += detok.push(id);
    completion += detok.flush();
    EXPECT_EQ(prompt_text, c["prompt"].get<std::string>()) << c["name"];
    EXPECT_EQ(completion, c["completion_text"].get<std::string>()) << c["name"];
  }
}

// tokenizer_cases.json: ids from run.c, llama.cpp and Python SentencePiece
// (with BOS). transformers' LlamaTokenizer (slow, legacy=true) is Python
// SentencePiece on each piece of text between added tokens, plus BOS, so the
// "sentencepiece" column is the one to match. run.c and llama.cpp keep
// leading, trailing and repeated spaces as "▁" pieces, but this model's
// normalizer has remove_extra_whitespaces on, so SentencePiece (and
// transformers) drop or merge them; a literal U+2581 is whitespace for it too.
//
// Two cases legitimately differ from all three columns: "<s>" and "</s>".
// All three tools encoded them as plain text (llama.cpp with
// parse_special=false), but transformers cuts added/special token strings out
// of the text first (split_special_tokens=False is its default), so they
// become the BOS / EOS token.
TEST_F(Stories260K, EdgeCasesMatchSentencePiece) {
  const auto ref = read_json(testdata("stories260K/reference/tokenizer_cases.json"));
  ASSERT_EQ(ref["cases"].size(), 23u);
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    const std::string text = c["text"];
    const auto ids = tok().encode(text, true);
    if (text == "<s>" || text == "</s>") {
      EXPECT_EQ(ids, (std::vector<int32_t>{1, text == "<s>" ? 1 : 2})) << text;
      // What the three tools produced is what the text gives once it is not a
      // whole special token: check it through a neighbour that breaks the match.
      auto plain = ids_of(c["sentencepiece"]);
      EXPECT_EQ(tok().encode(text.substr(0, text.size() - 1), true),
                std::vector<int32_t>(plain.begin(), plain.end() - 1))
          << text;
      ++checked;
      continue;
    }
    EXPECT_EQ(ids, ids_of(c["sentencepiece"])) << text;
    if (c["runc_eq_sentencepiece"].get<bool>()) {
      EXPECT_EQ(ids, ids_of(c["runc"])) << text;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 23);
}

// Where the text has no whitespace that normalization changes, decoding the
// ids gives the text back.
TEST_F(Stories260K, EdgeCasesRoundTrip) {
  const auto ref = read_json(testdata("stories260K/reference/tokenizer_cases.json"));
  for (const auto& c : ref["cases"]) {
    const std::string text = c["text"];
    if (!c["runc_eq_sentencepiece"].get<bool>() || text == "<s>" || text == "</s>") continue;
    EXPECT_EQ(tok().decode(tok().encode(text, true)), text) << text;
    EXPECT_EQ(tok().decode(tok().encode(text, false)), text) << text;
  }
  EXPECT_EQ(tok().decode(tok().encode("<s>", false), false), "<s>");
  EXPECT_EQ(tok().decode(tok().encode("</s>", false), false), "</s>");
}

TEST(Stories260KFiles, ModelFilePathLoadsLikeDirectory) {
  // tok512.model sits alone (no JSON next to it): the model's own <s>, </s>,
  // <unk> and the LlamaTokenizer defaults apply.
  auto from_file = Tokenizer::load(test::stories_model().string());
  auto from_dir = Tokenizer::load(test::stories_hf().string());
  EXPECT_EQ(from_file->vocab_size(), 512);
  EXPECT_EQ(from_file->bos_id(), 1);
  EXPECT_EQ(from_file->eos_id(), 2);
  EXPECT_EQ(from_file->eos_ids(), std::vector<int32_t>{2});
  const auto ref = read_json(testdata("stories260K/reference/greedy_runc.json"));
  for (const auto& c : ref["cases"]) {
    const std::string prompt = c["prompt"];
    EXPECT_EQ(from_file->encode(prompt, true), ids_of(c["prompt_ids"])) << c["name"];
    EXPECT_EQ(from_file->encode(prompt, true), from_dir->encode(prompt, true)) << c["name"];
  }
  // A tokenizer.model path inside a model dir reads the JSON next to it.
  auto hf_file = Tokenizer::load((test::stories_hf() / "tokenizer.model").string());
  EXPECT_EQ(hf_file->encode("Once", true), (std::vector<int32_t>{1, 403}));
}

// The golden checkpoints all ship tok512 with LlamaTokenizer configs; ChatGLM
// has no add_bos_token key (default true) and lists eos_token_id as [2].
TEST(GoldenTokenizers, LoadWithTheirConfigs) {
  for (const char* arch : {"llama", "chatglm_glm4", "qwen2", "deepseek_v3", "baichuan_7b_rope"}) {
    auto tok = Tokenizer::load(testdata(std::string("golden/") + arch + "/hf").string());
    EXPECT_EQ(tok->vocab_size(), 512) << arch;
    EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2}) << arch;
    EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378})) << arch;
  }
}

}  // namespace
}  // namespace rinfer

// WordPiece (BERT) and Unigram tokenizer.json models on small hand-made
// files, where every expected id follows from the rules by hand (the
// comments derive them). bert-bge's llama.cpp vectors test WordPiece on a
// real vocabulary (llamacpp_vocab_test.cpp).
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

json bert_json(int max_chars = 100) {
  json vocab = {{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}, {"un", 3},    {"##aff", 4}, {"##able", 5},
                {"hello", 6}, {",", 7},     {"!", 8},     {"cafe", 9},  {"##s", 10},  {"中", 11},
                {"a", 12},    {"##ff", 13}, {"$", 14},    {"unaff", 15}};
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", 0}, {"content", "[UNK]"}, {"special", true}},
                                        {{"id", 1}, {"content", "[CLS]"}, {"special", true}},
                                        {{"id", 2}, {"content", "[SEP]"}, {"special", true}}})},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", nullptr},
            {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 2}}, {"cls", {"[CLS]", 1}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", max_chars},
            {"vocab", vocab}}}};
}

std::unique_ptr<Tokenizer> load_json(const test::TempDir& t, const json& j) {
  t.write("tokenizer.json", j.dump());
  return Tokenizer::load(t.str());
}

TEST(WordPiece, LongestMatchFirst) {
  test::TempDir t;
  const auto tok = load_json(t, bert_json());
  // Lower-cased, accents stripped (strip_accents null follows lowercase):
  // "unaffable, hello!  cafe". Words: unaffable , hello ! cafe.
  // "unaffable": the longest token at the start is "unaff" (15), then the
  // longest "##" token for "able" is "##able" (5).
  EXPECT_EQ(tok->encode("UnAffable, HELLO!  Café", false), (Ids{15, 5, 7, 6, 8, 9}));
  // With special tokens: BertProcessing's [CLS] ... [SEP].
  EXPECT_EQ(tok->encode("hello", true), (Ids{1, 6, 2}));
  // "cafes" = cafe ##s; "unx": "un" then no token for "x" → the whole word is [UNK].
  EXPECT_EQ(tok->encode("cafes unx", false), (Ids{9, 10, 0}));
  // Punctuation (Unicode P or ASCII punctuation such as $) splits words.
  EXPECT_EQ(tok->encode("hello$hello", false), (Ids{6, 14, 6}));
  // CJK ideographs are words of their own; 文 is not in the vocabulary.
  EXPECT_EQ(tok->encode("a中文a", false), (Ids{12, 11, 0, 12}));
  // clean_text: control characters vanish, tab and newline are spaces.
  EXPECT_EQ(tok->encode("hel\x01lo\thello\nhello", false), (Ids{6, 6, 6}));
  EXPECT_EQ(tok->encode("[CLS] hello", false), (Ids{1, 6}));
  EXPECT_EQ(tok->encode_no_parse_special("[CLS]", false), (Ids{0, 0, 0}));  // "[" "cls" "]": none in the vocab
}

TEST(WordPiece, MaxInputCharsPerWord) {
  test::TempDir t;
  const auto tok = load_json(t, bert_json(6));
  EXPECT_EQ(tok->encode("unaff", false), (Ids{15}));
  // Seven characters: [UNK] although unaff ##able would cover it.
  EXPECT_EQ(tok->encode("unaffab", false), (Ids{0}));
}

TEST(WordPiece, Decode) {
  test::TempDir t;
  const auto tok = load_json(t, bert_json());
  // Pieces: "unaff" "able" → "unaffable"; "," "!" lose their space (cleanup).
  EXPECT_EQ(tok->decode(Ids{1, 15, 5, 7, 6, 8, 2}, true), "unaffable, hello!");
  EXPECT_EQ(tok->decode(Ids{1, 6, 2}, false), "[CLS] hello [SEP]");
}

TEST(WordPiece, BadFiles) {
  test::TempDir t;
  json j = bert_json();
  j["model"]["unk_token"] = "[NOPE]";
  test::expect_error([&] { load_json(t, j); }, "WordPiece unk_token \"[NOPE]\" is not in the vocabulary");
}

// Scores chosen so that the best segmentation is not the greedy one:
//   "abc": a + b + c = -1 -1 -1 = -3;  ab + c = -3 -1 = -4;  a + bc = -1 -1.5 = -2.5.
// Greedy longest-first would take "ab" then "c"; Viterbi takes "a" "bc".
// "abcd": abcd is not a piece; a+bc+d = -3.5, ab+cd = -3 -0.8 = -3.8,
// a+b+cd = -2.8 (best).
json unigram_json(bool byte_fallback) {
  json vocab = json::array({{"<unk>", 0.0},
                            {"a", -1.0},
                            {"b", -1.0},
                            {"c", -1.0},
                            {"d", -1.0},
                            {"ab", -3.0},
                            {"bc", -1.5},
                            {"cd", -0.8},
                            {"<0x78>", -5.0}});
  return {{"version", "1.0"},
          {"added_tokens", json::array({json{{"id", 0}, {"content", "<unk>"}, {"special", true}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "Fuse"}}},
          {"model", {{"type", "Unigram"}, {"unk_id", 0}, {"byte_fallback", byte_fallback}, {"vocab", vocab}}}};
}

TEST(Unigram, ViterbiBestSegmentation) {
  test::TempDir t;
  const auto tok = load_json(t, unigram_json(false));
  EXPECT_EQ(tok->encode("abc", false), (Ids{1, 6}));
  EXPECT_EQ(tok->encode("abcd", false), (Ids{1, 2, 7}));
  EXPECT_EQ(tok->encode("ab", false), (Ids{1, 2}));  // a + b = -2 beats ab = -3
  EXPECT_EQ(tok->encode("abc abcd", false), (Ids{1, 6, 1, 2, 7}));
  // Unknown characters (score min - 10 = -13 each) fuse into one <unk>.
  EXPECT_EQ(tok->encode("axxéb", false), (Ids{1, 0, 2}));
  EXPECT_EQ(tok->decode(Ids{1, 6}), "abc");
}

TEST(Unigram, ByteFallback) {
  test::TempDir t;
  const auto tok = load_json(t, unigram_json(true));
  // The fused unknown run "xx" becomes its bytes, each <0x78>.
  EXPECT_EQ(tok->encode("axxb", false), (Ids{1, 8, 8, 2}));
  // "é" has no byte pieces (only <0x78> exists), so it stays <unk>.
  EXPECT_EQ(tok->encode("aéb", false), (Ids{1, 0, 2}));
}

TEST(Unigram, BadFiles) {
  test::TempDir t;
  json j = unigram_json(false);
  j["model"]["vocab"][2] = json::array({"b"});
  test::expect_error([&] { load_json(t, j); }, "a Unigram vocab entry must be [\"piece\", score]");
  j = unigram_json(false);
  j["model"]["unk_id"] = 99;
  test::expect_error([&] { load_json(t, j); }, "Unigram unk_id 99 is outside the vocabulary");
  j = unigram_json(false);
  j["model"].erase("unk_id");
  const auto tok = load_json(t, j);
  test::expect_error([&] { tok->encode("axb", false); }, "no unk_id for the unknown character");
  j = unigram_json(false);
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  test::expect_error([&] { load_json(t, j); }, "unsupported normalizer type \"Precompiled\"");
}

}  // namespace
}  // namespace rinfer

// Tokenizer::load errors, config handling (BOS/EOS switches, added tokens,
// extra EOS ids, legacy=false), special tokens in text, decode rules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using test::expect_error;
using test::TempDir;
using Ids = std::vector<int32_t>;
namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> stories() { return Tokenizer::load(test::stories_hf().string()); }

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// --- load errors -----------------------------------------------------------

TEST(TokenizerLoad, MissingDirectory) {
  TempDir t;
  const std::string missing = (t.path() / "nope").string();
  expect_error([&] { Tokenizer::load(missing); }, "no such file or directory: " + missing);
}

TEST(TokenizerLoad, DirectoryWithoutTokenizerModel) {
  TempDir t;
  t.write("tokenizer_config.json", "{}");
  expect_error([&] { Tokenizer::load(t.str()); }, "no tokenizer.json, qwen.tiktoken or tokenizer.model in " + t.str());
}

TEST(TokenizerLoad, CorruptModelFile) {
  TempDir t;
  t.write("tokenizer.model", "this is not a protobuf \x01\x02\x03");
  expect_error([&] { Tokenizer::load(t.str()); }, "not a valid SentencePiece model");
  t.write("tokenizer.model", "");
  expect_error([&] { Tokenizer::load(t.str()); }, "not a valid SentencePiece model");
  // The real model cut in half.
  std::string model;
  {
    std::ifstream in(test::stories_model(), std::ios::binary);
    model.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(model.size(), 1000u);
  t.write("tokenizer.model", model.substr(0, model.size() / 2));
  expect_error([&] { Tokenizer::load(t.str()); }, "not a valid SentencePiece model");
  // The same errors when the file is named directly.
  expect_error([&] { Tokenizer::load((t.path() / "tokenizer.model").string()); }, "not a valid SentencePiece model");
}

TEST(TokenizerLoad, MalformedJson) {
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                           "config.json", "added_tokens.json"}) {
    TempDir t;
    t.with_tok512();
    t.write(name, "{\"add_bos_token\": tru");
    expect_error([&] { Tokenizer::load(t.str()); }, std::string(name) + " is not valid JSON");
  }
  TempDir t;
  t.with_tok512();
  t.write("tokenizer_config.json", "[1, 2]");
  expect_error([&] { Tokenizer::load(t.str()); }, "must hold a JSON object");
}

TEST(TokenizerLoad, WronglyTypedKeys) {
  struct Case {
    const char* file;
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      {"tokenizer_config.json", R"({"add_bos_token": "yes"})", "\"add_bos_token\" must be true or false"},
      {"tokenizer_config.json", R"({"bos_token": 5})", "\"bos_token\" must be a string or an object"},
      {"tokenizer_config.json", R"({"bos_token": {"lstrip": true}})", "has no string \"content\""},
      {"tokenizer_config.json", R"({"added_tokens_decoder": {"x": {"content": "a"}}})", "is not a token id"},
      {"tokenizer_config.json", R"({"additional_special_tokens": "<a>"})", "must be a list"},
      {"tokenizer_config.json", R"({"added_tokens_decoder": {"2000000000": {"content": "a"}}})", "implausible id"},
      {"generation_config.json", R"({"eos_token_id": "2"})", "\"eos_token_id\" must be a token id"},
      {"config.json", R"({"eos_token_id": [2, -1]})", "\"eos_token_id\" must be a token id"},
  };
  for (const auto& c : cases) {
    TempDir t;
    t.with_tok512();
    t.write(c.file, c.json);
    expect_error([&] { Tokenizer::load(t.str()); }, c.error);
  }
}

TEST(TokenizerLoad, UnknownSpecialTokenString) {
  TempDir t;
  t.with_tok512();
  t.write("tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  expect_error([&] { Tokenizer::load(t.str()); }, "eos_token \"<|im_end|>\" is neither in");
  // A pad token the vocabulary lacks is ignored: LlamaTokenizer has none anyway.
  t.write("tokenizer_config.json", R"({"pad_token": "<pad>"})");
  EXPECT_EQ(Tokenizer::load(t.str())->vocab_size(), 512);
}

// As transformers' AutoTokenizer: the fast tokenizer (tokenizer.json) wins
// over tokenizer.model when a directory has both.
TEST(TokenizerLoad, PrefersTokenizerJson) {
  TempDir t;
  t.with_tok512();
  fs::copy_file(test::testdata("tokenizer/hf/llama2/tokenizer.json"), t.path() / "tokenizer.json");
  EXPECT_EQ(Tokenizer::load(t.str())->vocab_size(), 32000);
  EXPECT_EQ(Tokenizer::load((t.path() / "tokenizer.model").string())->vocab_size(), 512);
}

TEST(TokenizerLoad, MalformedTokenizerJson) {
  TempDir t;
  t.write("tokenizer.json", "{\"model\": ");
  expect_error([&] { Tokenizer::load(t.str()); }, "is not valid JSON");
  t.write("tokenizer.json", R"({"model": {"type": "WordLevel", "vocab": {}}})");
  expect_error([&] { Tokenizer::load(t.str()); }, "unsupported model type \"WordLevel\"");
  t.write("tokenizer.json", R"({"model": {"type": "Unigram", "vocab": []}})");
  expect_error([&] { Tokenizer::load(t.str()); }, "Unigram vocabulary is empty");
  t.write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})");
  expect_error([&] { Tokenizer::load(t.str()); }, "merge \"a b\" uses a token that is not in the vocabulary");
  t.write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?<x"}, "behavior": "Isolated"}})");
  expect_error([&] { Tokenizer::load(t.str()); }, "unsupported regex");
  t.write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                "normalizer": {"type": "Precompiled"}})");
  expect_error([&] { Tokenizer::load(t.str()); }, "unsupported normalizer type \"Precompiled\"");
}

// Real tokenizer_config.json files (chat templates, AddedToken objects,
// hundreds of added tokens) next to tok512: the config parts must be read
// as transformers reads them.
TEST(TokenizerLoad, RealWorldConfigs) {
  auto with_config = [](const char* family, TempDir& t) {
    t.with_tok512();
    fs::copy_file(test::testdata(std::string("tokenizer/hf/") + family + "/tokenizer_config.json"),
                  t.path() / "tokenizer_config.json");
    return Tokenizer::load(t.str());
  };
  {
    TempDir t;
    auto tok = with_config("llama2", t);  // the same LlamaTokenizer settings as stories260K
    EXPECT_EQ(tok->encode("Hello <s> world", true), stories()->encode("Hello <s> world", true));
  }
  {
    TempDir t;
    auto tok = with_config("qwen3", t);  // add_bos_token false, bos/unk null, 26 added tokens
    EXPECT_EQ(tok->bos_id(), -1);
    EXPECT_EQ(tok->eos_id(), 151645);
    EXPECT_EQ(tok->vocab_size(), 151669);
    const Ids user = tok->encode("user", false);
    EXPECT_EQ(tok->encode("<|im_start|>user<|im_end|>", true), concat({{151644}, user, {151645}}));
    EXPECT_TRUE(tok->is_special(151644));    // additional_special_tokens
    EXPECT_TRUE(tok->is_special(151643));    // pad_token <|endoftext|>
    EXPECT_FALSE(tok->is_special(151657));   // <tool_call> is a plain added token
    EXPECT_EQ(tok->decode(Ids{151644, 151657, 151645}, true), "<tool_call>");
    expect_error([&] { tok->decode(Ids{10000}); }, "token id 10000 has no piece in the tokenizer (vocab size 151669)");
  }
  {
    TempDir t;
    auto tok = with_config("llama3", t);  // no add_bos_token key: LlamaTokenizer default, BOS on
    EXPECT_EQ(tok->bos_id(), 128000);
    EXPECT_EQ(tok->eos_id(), 128001);
    EXPECT_EQ(tok->encode("", true), (Ids{128000}));
  }
  {
    TempDir t;  // no added_tokens_decoder: its BOS string is not in tok512
    expect_error([&] { with_config("deepseek_v3", t); }, "bos_token \"<\xEF\xBD\x9C" "begin");
  }
}

// --- encode ------------------------------------------------------------------

TEST(TokenizerEncode, InvalidUtf8IsRejectedWithOffset) {
  auto tok = stories();
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {"abc\x80", 3},                   // lone continuation byte
      {"ab\xC3", 2},                    // truncated 2-byte sequence
      {"ok \xE2\x82", 3},               // truncated 3-byte sequence
      {"\xC0\xAF", 0},                  // overlong '/'
      {"\xE0\x80\xAF", 0},              // overlong, 3 bytes
      {"x\xED\xA0\x80", 1},             // UTF-16 surrogate
      {"\xF4\x90\x80\x80", 0},          // above U+10FFFF
      {"\xF5\x80\x80\x80", 0},          // invalid lead byte
      {"caf\xC3\xA9 \xFF", 6},          // valid é, then 0xFF
      {"\xC3\x28", 0},                  // lead without continuation
  };
  for (const auto& c : cases) {
    expect_error([&] { tok->encode(c.text, true); },
                 "prompt is not valid UTF-8 (byte offset " + std::to_string(c.offset) + ")");
  }
  // Edge code points that are valid.
  EXPECT_NO_THROW(tok->encode("\x7F \xC2\x80 \xEF\xBF\xBF \xF0\x90\x80\x80 \xF4\x8F\xBF\xBF", true));
  EXPECT_NO_THROW(tok->encode(std::string("a\0b", 3), true));
}

TEST(TokenizerEncode, SpecialTokenStringsInTextAreTokens) {
  auto tok = stories();
  const Ids hello = tok->encode("Hello", false);  // ▁He ll o
  const Ids world = tok->encode("world", false);  // ▁w or ld
  EXPECT_EQ(hello, (Ids{346, 306, 414}));
  EXPECT_EQ(world, (Ids{263, 304, 341}));
  // Each piece of text between special tokens is encoded on its own (with
  // its own dummy prefix, legacy=true), then the ids are joined.
  EXPECT_EQ(tok->encode("Hello <s> world", true), concat({{1}, hello, {1}, world}));
  EXPECT_EQ(tok->encode("Hello</s>world", false), concat({hello, {2}, world}));
  EXPECT_EQ(tok->encode("<unk>", false), (Ids{0}));
  EXPECT_EQ(tok->encode("<s><s></s>", false), (Ids{1, 1, 2}));
  // legacy=true: the text after a special token gets a prefix space too, so
  // "." becomes "▁" + "." here (transformers' documented legacy behaviour).
  EXPECT_EQ(tok->encode("Hello <s>.", true), concat({{1}, hello, {1, 410, 426}}));
  // Earliest match first: "<s" is text, then "</s>".
  EXPECT_EQ(tok->encode("<s</s>", false), concat({tok->encode("<s", false), {2}}));
  // Almost-tokens stay text.
  EXPECT_EQ(tok->encode("<s >", false), (Ids{410, 504, 419, 410, 505}));
}

TEST(TokenizerEncode, EmptyText) {
  auto tok = stories();
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
  EXPECT_EQ(tok->encode("", false), Ids{});
}

TEST(TokenizerEncode, BosEosSwitchesFromConfig) {
  TempDir t;
  t.with_tok512();
  t.write("tokenizer_config.json", R"({"add_bos_token": false, "add_eos_token": true})");
  auto tok = Tokenizer::load(t.str());
  EXPECT_EQ(tok->encode("Once", true), (Ids{403, 2}));
  EXPECT_EQ(tok->encode("Once", false), (Ids{403}));
  EXPECT_EQ(tok->encode("", true), (Ids{2}));

  // A null bos_token means there is none.
  t.write("tokenizer_config.json", R"({"bos_token": null})");
  tok = Tokenizer::load(t.str());
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->encode("Once", true), (Ids{403}));
  EXPECT_FALSE(tok->is_special(1));
  // <s> is then an ordinary (control) piece: plain text, decoded as nothing.
  EXPECT_EQ(tok->encode("<s>", false), (Ids{410, 504, 419, 505}));
  EXPECT_EQ(tok->decode(Ids{1, 403}, false), "Once");
}

TEST(TokenizerEncode, AddedTokensWithStripRules) {
  TempDir t;
  t.with_tok512();
  t.write("tokenizer_config.json", R"({
    "added_tokens_decoder": {
      "0": {"content": "<unk>", "special": true},
      "1": {"content": "<s>", "special": true},
      "2": {"content": "</s>", "special": true},
      "512": {"content": "<|im_start|>", "special": true},
      "513": {"content": "<tool>", "special": false, "lstrip": true, "rstrip": true},
      "514": {"content": "<w>", "special": false, "single_word": true},
      "516": {"content": "<|im_start|>x", "special": false}
    },
    "additional_special_tokens": ["<|im_start|>"]
  })");
  auto tok = Tokenizer::load(t.str());
  EXPECT_EQ(tok->vocab_size(), 517);
  EXPECT_TRUE(tok->is_special(512));
  EXPECT_FALSE(tok->is_special(513));
  EXPECT_EQ(tok->id_to_piece(512), "<|im_start|>");
  EXPECT_EQ(tok->id_to_piece(513), "<tool>");
  const Ids user = tok->encode("user", false);
  EXPECT_EQ(tok->encode("<|im_start|>user", true), concat({{1, 512}, user}));
  // Longest match wins where two added tokens start at the same place.
  EXPECT_EQ(tok->encode("<|im_start|>xuser", false), concat({{516}, user}));
  // lstrip/rstrip eat the newlines around <tool> (Python str.strip whitespace).
  EXPECT_EQ(tok->encode("a\n<tool>\nb", false), concat({tok->encode("a", false), {513}, tok->encode("b", false)}));
  EXPECT_EQ(tok->encode("a\xE3\x80\x80<tool>\xC2\x85" "b", false),  // U+3000 and U+0085 are whitespace too
            concat({tok->encode("a", false), {513}, tok->encode("b", false)}));
  // Without strip rules the newline stays with the text.
  EXPECT_EQ(tok->encode("a\n<|im_start|>", false), concat({tok->encode("a\n", false), {512}}));
  // single_word: a token glued to a word is not a token.
  EXPECT_EQ(tok->encode("a <w> b", false), concat({tok->encode("a", false), {514}, tok->encode("b", false)}));
  EXPECT_EQ(tok->encode("x<w>", false), tok->encode("x<w>", false));
  EXPECT_EQ(tok->encode("x<w>", false), (Ids{410, 444, 504, 424, 505}));
  EXPECT_EQ(tok->encode("<w>y", false), (Ids{410, 504, 424, 505, 422}));
  // Ids past the model's pieces exist only as added tokens.
  expect_error([&] { tok->decode(Ids{515}); }, "token id 515 has no piece");
  expect_error([&] { tok->decode(Ids{517}); }, "token id 517 is out of range (vocab size 517)");
  // decode: special tokens skipped or written, added ones always written, and
  // the piece after a written token keeps its leading space.
  EXPECT_EQ(tok->decode(Ids{1, 512, 513, 403}, true), "<tool> Once");
  EXPECT_EQ(tok->decode(Ids{1, 512, 513, 403}, false), "<s><|im_start|><tool> Once");
  EXPECT_EQ(tok->decode(Ids{403, 513, 407}, true), "Once<tool> upon");
}

TEST(TokenizerEncode, SplitSpecialTokensOption) {
  TempDir t;
  t.with_tok512();
  t.write("tokenizer_config.json", R"({"split_special_tokens": true})");
  auto tok = Tokenizer::load(t.str());
  // As Python SentencePiece / run.c / llama.cpp (parse_special=false) do.
  EXPECT_EQ(tok->encode("<s>", true), (Ids{1, 410, 504, 419, 505}));
}

// Older saves: no added_tokens_decoder, special tokens from
// special_tokens_map.json, added tokens from added_tokens.json. With
// added_tokens_decoder present, special_tokens_map.json is not read.
TEST(TokenizerEncode, LegacyConfigFiles) {
  TempDir t;
  t.with_tok512();
  t.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  t.write("special_tokens_map.json", R"({"eos_token": {"content": "<unk>"}, "additional_special_tokens": ["<e>"]})");
  t.write("added_tokens.json", R"({"<e>": 512})");
  auto tok = Tokenizer::load(t.str());
  EXPECT_EQ(tok->eos_id(), 0);
  EXPECT_EQ(tok->vocab_size(), 513);
  EXPECT_TRUE(tok->is_special(512));
  EXPECT_EQ(tok->encode("a<e>", false), concat({tok->encode("a", false), {512}}));

  t.write("tokenizer_config.json", R"({"eos_token": "</s>", "added_tokens_decoder": {"2": {"content": "</s>", "special": true}}})");
  tok = Tokenizer::load(t.str());
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->vocab_size(), 512);
}

TEST(TokenizerEncode, ExtraEosIdsFromGenerationConfig) {
  TempDir t;
  t.with_tok512();
  t.write("generation_config.json", R"({"eos_token_id": [2, 7]})");
  t.write("config.json", R"({"eos_token_id": 9, "bos_token_id": 1})");
  auto tok = Tokenizer::load(t.str());
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->eos_ids(), (Ids{2, 7, 9}));
  EXPECT_TRUE(tok->is_eos(7));
  EXPECT_TRUE(tok->is_eos(9));
  EXPECT_FALSE(tok->is_eos(1));
  // An id outside the vocabulary (padded embedding rows) is still a stop id.
  t.write("config.json", R"({"eos_token_id": [600], "bos_token_id": null})");
  EXPECT_EQ(Tokenizer::load(t.str())->eos_ids(), (Ids{2, 7, 600}));
  t.write("config.json", R"({"eos_token_id": null})");
  t.write("generation_config.json", R"({})");
  EXPECT_EQ(Tokenizer::load(t.str())->eos_ids(), (Ids{2}));
}

// legacy=false (LlamaTokenizer after transformers PR #24565): no prefix space
// after a special token, a literal U+2581 reads as a space.
TEST(TokenizerEncode, NonLegacyMode) {
  TempDir t;
  t.with_tok512();
  t.write("tokenizer_config.json", R"({"legacy": false})");
  auto tok = Tokenizer::load(t.str());
  auto legacy = stories();
  const Ids hello{346, 306, 414};
  EXPECT_EQ(tok->encode("Hello", true), concat({{1}, hello}));
  EXPECT_EQ(tok->encode("Once upon a time", true), legacy->encode("Once upon a time", true));
  // transformers' own example: "." right after <s> has no "▁" in front.
  EXPECT_EQ(tok->encode("Hello <s>.", true), concat({{1}, hello, {1, 426}}));
  EXPECT_EQ(legacy->encode("Hello <s>.", true), concat({{1}, hello, {1, 410, 426}}));
  // A leading special token: the lone prefix "▁" before it is dropped, and
  // the text after it starts without a space ("H" "e" "ll" "o").
  EXPECT_EQ(tok->encode("<s>Hello", false), (Ids{1, 440, 411, 306, 414}));
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
  EXPECT_EQ(tok->decode(tok->encode("Hello <s>.", true)), "Hello.");
}

// --- decode ------------------------------------------------------------------

TEST(TokenizerDecode, SpecialTokens) {
  auto tok = stories();
  const Ids ids{1, 403, 407, 2};
  EXPECT_EQ(tok->decode(ids), "Once upon");
  EXPECT_EQ(tok->decode(ids, false), "<s> Once upon</s>");
  EXPECT_EQ(tok->decode(Ids{0}, true), "");
  EXPECT_EQ(tok->decode(Ids{0}, false), "<unk>");
  EXPECT_EQ(tok->decode(Ids{}, false), "");
  // Skipped special tokens do not split byte-fallback characters or words.
  EXPECT_EQ(tok->decode(Ids{229, 2, 160, 167}), "\xE2\x9D\xA4");                  // ❤
  EXPECT_EQ(tok->decode(Ids{229, 2, 160, 167}, false), "\xEF\xBF\xBD</s>\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(Ids{403, 2, 407}), "Once upon");
  EXPECT_EQ(tok->decode(Ids{2, 407}), "upon");  // the first piece loses its space
}

TEST(TokenizerDecode, SentencePieceRules) {
  auto tok = stories();
  EXPECT_EQ(tok->decode(Ids{410}), "");
  // SentencePiece drops "▁" while its output is still empty.
  EXPECT_EQ(tok->decode(Ids{410, 403}), "Once");
  EXPECT_EQ(tok->decode(Ids{403, 410, 407}), "Once  upon");
  EXPECT_EQ(tok->decode(Ids{13, 403}), "\n Once");
  // Incomplete or invalid byte sequences become one U+FFFD per byte.
  EXPECT_EQ(tok->decode(Ids{229, 160}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(Ids{258, 403}), "\xEF\xBF\xBD Once");
}

TEST(TokenizerDecode, OutOfRangeIds) {
  auto tok = stories();
  expect_error([&] { tok->decode(Ids{1, 403, 512}); }, "token id 512 is out of range (vocab size 512)");
  expect_error([&] { tok->decode(Ids{-1}); }, "token id -1 is out of range (vocab size 512)");
  expect_error([&] { tok->decode(Ids{575}, false); }, "token id 575 is out of range (vocab size 512)");
  expect_error([&] { tok->id_to_piece(512); }, "token id 512 is out of range (vocab size 512)");
  expect_error([&] { tok->id_to_piece(-3); }, "token id -3 is out of range (vocab size 512)");
  StreamingDetokenizer detok(*tok);
  expect_error([&] { detok.push(1000); }, "token id 1000 is out of range (vocab size 512)");
}

}  // namespace
}  // namespace rinfer

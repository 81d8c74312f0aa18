// StreamingDetokenizer: pieces appear as soon as they are whole UTF-8, and
// all pieces together are exactly decode() of all ids.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using Ids = std::vector<int32_t>;

class Streaming : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = Tokenizer::load(test::stories_hf().string()).release(); }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static const Tokenizer& tok() { return *tok_; }
  static Tokenizer* tok_;

  // Pushes every id, checks each piece is valid UTF-8 and that the pieces add
  // up to decode(ids); returns the pieces (the last one from flush()).
  static std::vector<std::string> stream(const Ids& ids, bool skip_special = true) {
    StreamingDetokenizer detok(tok(), skip_special);
    std::vector<std::string> pieces;
    std::string all;
    for (int32_t id : ids) {
      pieces.push_back(detok.push(id));
      EXPECT_EQ(utf8::find_invalid(pieces.back()), std::string::npos) << "broken character after id " << id;
      all += pieces.back();
    }
    pieces.push_back(detok.flush());
    all += pieces.back();
    EXPECT_EQ(all, tok().decode(ids, skip_special));
    return pieces;
  }
};
Tokenizer* Streaming::tok_ = nullptr;

TEST_F(Streaming, WordsAppearAtOnce) {
  const auto p = stream({1, 403, 407, 261, 378});
  EXPECT_EQ(p, (std::vector<std::string>{"", "Once", " upon", " a", " time", ""}));
  const auto q = stream({1, 403, 407, 2}, /*skip_special=*/false);
  EXPECT_EQ(q, (std::vector<std::string>{"<s>", " Once", " upon", "</s>", ""}));
}

// "Lily ate a crème brûlée.": è and û come as two byte-fallback ids each.
TEST_F(Streaming, ByteFallbackCharactersFromReference) {
  const auto ref = test::read_json(test::testdata("stories260K/reference/greedy_runc.json"));
  const nlohmann::json* utf8_case = nullptr;
  for (const auto& c : ref["cases"])
    if (c["name"] == "utf8") utf8_case = &c;
  ASSERT_NE(utf8_case, nullptr);
  const Ids prompt = (*utf8_case)["prompt_ids"].get<Ids>();
  ASSERT_EQ(prompt, (Ids{1, 317, 261, 413, 411, 261, 280, 420, 198, 171, 423, 411, 268, 420, 198, 190, 421, 485, 411, 426}));
  const auto p = stream(prompt);
  // ... "▁c" "r" <0xC3> <0xA8> "m" "e" ...: nothing for the lead byte, then "è".
  EXPECT_EQ(p[7], "r");
  EXPECT_EQ(p[8], "");
  EXPECT_EQ(p[9], "\xC3\xA8");
  EXPECT_EQ(p[14], "");
  EXPECT_EQ(p[15], "\xC3\xBB");  // û
  std::string all;
  for (const auto& s : p) all += s;
  EXPECT_EQ(all, "Lily ate a cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e.");

  Ids full = prompt;
  for (int32_t id : (*utf8_case)["greedy_ids"].get<Ids>()) full.push_back(id);
  stream(full);
  stream(full, false);
}

// "I ❤ cats 🐱" (tokenizer_cases.json): 3- and 4-byte characters as bytes.
TEST_F(Streaming, EmojiThroughByteFallback) {
  const Ids ids{1, 359, 410, 229, 160, 167, 280, 294, 419, 410, 243, 162, 147, 180};
  const auto p = stream(ids);
  EXPECT_EQ(p[3], "");
  EXPECT_EQ(p[4], "");
  EXPECT_EQ(p[5], "\xE2\x9D\xA4");  // ❤
  EXPECT_EQ(p[10], "");
  EXPECT_EQ(p[11], "");
  EXPECT_EQ(p[12], "");
  EXPECT_EQ(p[13], "\xF0\x9F\x90\xB1");  // 🐱
  EXPECT_EQ(p[14], "");
  EXPECT_EQ(tok().encode("I \xE2\x9D\xA4 cats \xF0\x9F\x90\xB1", true), ids);
}

// Bytes that never form a character still come out, as decode() writes them
// (one U+FFFD each), at the latest when flushed.
TEST_F(Streaming, InvalidBytesAreNotLost) {
  stream({403, 258, 403});         // <0xFF> between words
  stream({403, 229, 160});         // unfinished ❤ at the end
  stream({229, 229, 160, 167});    // a stray lead byte, then ❤
  stream({160, 167, 403});         // continuation bytes without a lead
  const auto p = stream({403, 229, 160});
  EXPECT_EQ(p.back(), "\xEF\xBF\xBD\xEF\xBF\xBD");  // held back until flush
  Ids many(200, 258);  // a long run of invalid bytes
  many.push_back(403);
  stream(many);
}

TEST_F(Streaming, FlushStartsANewStream) {
  StreamingDetokenizer detok(tok());
  EXPECT_EQ(detok.push(403), "Once");
  EXPECT_EQ(detok.push(229), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
  // A new stream: its first piece loses its leading space again.
  EXPECT_EQ(detok.push(407), "upon");
  EXPECT_EQ(detok.flush(), "");
  EXPECT_EQ(detok.flush(), "");
}

TEST_F(Streaming, BadIdLeavesStreamIntact) {
  StreamingDetokenizer detok(tok());
  EXPECT_EQ(detok.push(403), "Once");
  EXPECT_THROW(detok.push(512), Error);
  EXPECT_THROW(detok.push(-1), Error);
  EXPECT_EQ(detok.push(407), " upon");
  EXPECT_EQ(detok.flush(), "");
}

// Random id streams mixing words, lone "▁", special tokens, and byte pieces
// that form valid, broken and interleaved characters, long enough for the
// window to be shrunk many times.
TEST_F(Streaming, RandomStreamsMatchDecode) {
  std::mt19937 rng(1234);
  const Ids specials{0, 1, 2};
  const std::vector<Ids> chars{{198, 171}, {198, 190}, {229, 160, 167}, {243, 162, 147, 180}, {13}};
  for (int round = 0; round < 200; ++round) {
    Ids ids;
    const int n = 1 + int(rng() % 400);
    const int mode = round % 4;  // some streams are mostly specials or bytes
    while (int(ids.size()) < n) {
      const unsigned r = rng() % 100;
      if (r < (mode == 1 ? 60u : 8u)) {
        ids.push_back(specials[rng() % specials.size()]);
      } else if (r < 70) {
        const Ids& c = chars[rng() % chars.size()];
        ids.insert(ids.end(), c.begin(), c.end());
      } else if (r < (mode == 2 ? 95u : 75u)) {
        ids.push_back(int32_t(3 + rng() % 256));  // any byte
      } else if (r < 85) {
        ids.push_back(410);
      } else {
        ids.push_back(int32_t(259 + rng() % 253));
      }
    }
    stream(ids, true);
    stream(ids, false);
  }
}

// Each push decodes a bounded window, so a long generation stays fast even
// in a sanitizer build. 20000 ids would take minutes if every push decoded
// everything so far.
TEST_F(Streaming, LongGenerationIsLinear) {
  const auto ref = test::read_json(test::testdata("stories260K/reference/greedy_runc.json"));
  Ids ids;
  while (ids.size() < 20000)
    for (int32_t id : ref["cases"][0]["greedy_ids"].get<Ids>()) ids.push_back(id);
  const auto t0 = std::chrono::steady_clock::now();
  StreamingDetokenizer detok(tok());
  std::string all;
  for (int32_t id : ids) all += detok.push(id);
  all += detok.flush();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(all, tok().decode(ids));
  EXPECT_LT(s, 30.0);
}

}  // namespace
}  // namespace rinfer

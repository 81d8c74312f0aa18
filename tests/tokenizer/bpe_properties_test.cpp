// Properties of the byte-level BPE pipeline: decode(encode(x)) == x on
// random UTF-8, invalid UTF-8 is rejected with a one-line error (Python
// strings cannot hold it, so transformers never sees it), random ids decode
// to valid UTF-8 (bad bytes become U+FFFD as in the tokenizers library), and
// no input takes quadratic time.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode/unicode.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

const Tokenizer& deepseek() {
  static const auto tok = Tokenizer::load(test::testdata("tokenizer/hf/deepseek_v3").string());
  return *tok;
}

// A random valid UTF-8 string mixing ASCII, whitespace, Latin, CJK, emoji.
std::string random_utf8(std::mt19937& rng, size_t n) {
  std::string s;
  std::uniform_int_distribution<int> kind(0, 5);
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp;
    switch (kind(rng)) {
      case 0: cp = std::uniform_int_distribution<uint32_t>(0x20, 0x7E)(rng); break;
      case 1: cp = " \t\n\r"[std::uniform_int_distribution<int>(0, 3)(rng)]; break;
      case 2: cp = std::uniform_int_distribution<uint32_t>(0x80, 0x7FF)(rng); break;
      case 3: cp = std::uniform_int_distribution<uint32_t>(0x4E00, 0x9FFF)(rng); break;
      case 4: cp = std::uniform_int_distribution<uint32_t>(0x1F300, 0x1FAFF)(rng); break;
      default: cp = std::uniform_int_distribution<uint32_t>(0x1, 0x10FFFF)(rng); break;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
    unicode::append_utf8(cp, &s);
  }
  return s;
}

TEST(BpeProperties, RoundTripRandomUtf8) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 300; ++iter) {
    const std::string text = random_utf8(rng, 1 + iter % 97);
    // Without special-token parsing: random text may spell an added token,
    // which decodes back to the same text anyway, but keep the property pure.
    const auto ids = deepseek().encode_no_parse_special(text, false);
    ASSERT_EQ(deepseek().decode(ids, false), text) << "iteration " << iter;
  }
}

TEST(BpeProperties, RandomBytesRoundTripOrError) {
  std::mt19937 rng(99);
  int valid = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string bytes(1 + iter % 41, '\0');
    for (char& c : bytes) c = char(std::uniform_int_distribution<int>(0, 255)(rng));
    if (utf8::find_invalid(bytes) == std::string::npos) {
      ++valid;
      EXPECT_EQ(deepseek().decode(deepseek().encode(bytes, false), false), bytes);
    } else {
      test::expect_error([&] { deepseek().encode(bytes, false); }, "is not valid UTF-8");
    }
  }
  EXPECT_GT(valid, 0);
}

TEST(BpeProperties, RandomIdsDecodeToValidUtf8) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, 127999);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<int32_t> ids(1 + iter % 13);
    for (auto& x : ids) x = id(rng);
    const std::string text = deepseek().decode(ids, false);
    EXPECT_EQ(utf8::find_invalid(text), std::string::npos);
  }
}

double seconds_to_encode(const Tokenizer& tok, const std::string& text, size_t* n_ids) {
  const auto t0 = std::chrono::steady_clock::now();
  *n_ids = tok.encode(text, false).size();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 1 MB without a space is one pre-token for BPE, and 100 000 emoji are one
// punctuation run: both must stay near-linear. The bound is generous (a
// quadratic path takes minutes here), not a benchmark.
TEST(BpeProperties, NoQuadraticPaths) {
  double bound_s = 20.0;
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan + UBSan (Debug) the linear path is slow too, and beside the
  // other tests one text can pass 20 s. A quadratic path takes minutes even
  // without ASan, so 100 s still catches one.
  bound_s = 100.0;
#endif
  for (const char* family : {"llama3", "qwen3", "deepseek_v3", "llama2"}) {
    const auto tok = Tokenizer::load(test::testdata(std::string("tokenizer/hf/") + family).string());
    std::string letters;
    std::mt19937 rng(5);
    for (size_t i = 0; i < (1u << 20); ++i) letters.push_back(char('a' + rng() % 26));
    std::string emoji;
    for (int i = 0; i < 100000; ++i) emoji += "\xF0\x9F\x98\x80";  // U+1F600
    std::string spaces(1 << 20, ' ');
    for (const std::string* s : {&letters, &emoji, &spaces}) {
      size_t n = 0;
      const double t = seconds_to_encode(*tok, *s, &n);
      EXPECT_LT(t, bound_s) << family << ": " << s->size() << " bytes took " << t << " s";
      EXPECT_GT(n, 0u);
    }
  }
}

}  // namespace
}  // namespace rinfer

#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace rinfer {
namespace {

constexpr size_t npos = std::string_view::npos;

TEST(Utf8, FindInvalid) {
  EXPECT_EQ(utf8::find_invalid(""), npos);
  EXPECT_EQ(utf8::find_invalid("plain ascii"), npos);
  EXPECT_EQ(utf8::find_invalid("cr\xC3\xA8me \xE2\x82\xAC \xF0\x9F\x90\xB1"), npos);
  EXPECT_EQ(utf8::find_invalid("\xEF\xBF\xBD"), npos);        // U+FFFD itself is fine
  EXPECT_EQ(utf8::find_invalid("\xED\x9F\xBF"), npos);        // U+D7FF, last before surrogates
  EXPECT_EQ(utf8::find_invalid("\xEE\x80\x80"), npos);        // U+E000, first after
  EXPECT_EQ(utf8::find_invalid("\xF4\x8F\xBF\xBF"), npos);    // U+10FFFF
  EXPECT_EQ(utf8::find_invalid("a\x80"), 1u);
  EXPECT_EQ(utf8::find_invalid("ab\xC1\xBF"), 2u);            // overlong
  EXPECT_EQ(utf8::find_invalid("\xE0\x9F\xBF"), 0u);          // overlong 3-byte
  EXPECT_EQ(utf8::find_invalid("\xF0\x8F\xBF\xBF"), 0u);      // overlong 4-byte
  EXPECT_EQ(utf8::find_invalid("\xED\xBF\xBF"), 0u);          // surrogate
  EXPECT_EQ(utf8::find_invalid("\xF4\x90\x80\x80"), 0u);      // > U+10FFFF
  EXPECT_EQ(utf8::find_invalid("xyz\xE2\x82"), 3u);           // truncated at the end
  EXPECT_EQ(utf8::find_invalid("\xE2\x82x"), 0u);
  EXPECT_EQ(utf8::find_invalid("\xFE"), 0u);
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(utf8::complete_prefix(""), 0u);
  EXPECT_EQ(utf8::complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8::complete_prefix("a\xE2"), 1u);
  EXPECT_EQ(utf8::complete_prefix("a\xE2\x82"), 1u);
  EXPECT_EQ(utf8::complete_prefix("a\xE2\x82\xAC"), 4u);
  EXPECT_EQ(utf8::complete_prefix("a\xF0\x9F\x90"), 1u);
  EXPECT_EQ(utf8::complete_prefix("a\xF0\x9F\x90\xB1"), 5u);
  EXPECT_EQ(utf8::complete_prefix("a\xC3"), 1u);
  // Bytes no later byte can complete are not held back.
  EXPECT_EQ(utf8::complete_prefix("a\xFF"), 2u);
  EXPECT_EQ(utf8::complete_prefix("a\x80\x80\x80\x80"), 5u);
}

TEST(Utf8, PythonWhitespaceStrip) {
  EXPECT_EQ(utf8::lstrip(" \t\n\r\x0B\x0C" "a b "), "a b ");
  EXPECT_EQ(utf8::rstrip(" a b \t\n"), " a b");
  EXPECT_EQ(utf8::lstrip("\xE3\x80\x80\xC2\x85\xC2\xA0x"), "x");  // U+3000, U+0085, U+00A0
  EXPECT_EQ(utf8::rstrip("x\xE2\x80\xA8\xE2\x80\x83"), "x");      // U+2028, U+2003
  EXPECT_EQ(utf8::rstrip("x\xE2\x80\x8B"), "x\xE2\x80\x8B");        // U+200B is not whitespace
  EXPECT_EQ(utf8::lstrip("\xEF\xBB\xBFx"), "\xEF\xBB\xBFx");        // nor is U+FEFF
  EXPECT_EQ(utf8::lstrip("   "), "");
  EXPECT_EQ(utf8::rstrip("   "), "");
  EXPECT_EQ(utf8::rstrip(""), "");
}

}  // namespace
}  // namespace rinfer

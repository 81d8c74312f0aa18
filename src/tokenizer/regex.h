#pragma once
// Regular expressions as the Hugging Face tokenizers library runs them
// (Oniguruma, Ruby syntax, Unicode classes), on top of PCRE2 with UTF + UCP
// and JIT. Patterns are translated where the two engines differ:
// Oniguruma's \s is the Unicode White_Space property (U+0085 yes, U+FEFF
// no), PCRE2's is not, so \s and \S are rewritten to an explicit class; ^
// and $ are always line anchors in Ruby syntax (PCRE2_MULTILINE).
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rinfer {

class Regex {
 public:
  // literal: the pattern is a plain string (tokenizer.json's {"String": ...}).
  // Throws rinfer::Error naming the pattern when PCRE2 rejects it.
  explicit Regex(std::string_view pattern, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the non-overlapping matches, left to right;
  // an empty match advances by one character. text must be valid UTF-8.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

// The Oniguruma pattern rewritten for PCRE2 (exposed for tests).
std::string translate_oniguruma(std::string_view pattern);

// Every match of re in text replaced by content.
std::string regex_replace(const Regex& re, std::string_view text, std::string_view content);

}  // namespace rinfer

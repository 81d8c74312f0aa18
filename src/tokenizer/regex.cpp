#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace rinfer {

namespace {

// Oniguruma's \s: White_Space = TAB..CR, SPACE, NEL, and the Z categories.
constexpr std::string_view kSpaceSet = "\\x{9}-\\x{d}\\x{20}\\x{85}\\p{Z}";

// One JIT stack and match block per thread: PCRE2 forbids sharing them
// between threads that match at the same time.
struct MatchState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* ctx = nullptr;
  pcre2_match_data* data = nullptr;
  MatchState() {
    stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(ctx, nullptr, stack);
    data = pcre2_match_data_create(1, nullptr);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
  }
};

MatchState& match_state() {
  thread_local MatchState st;
  return st;
}

}  // namespace

std::string translate_oniguruma(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kSpaceSet) : "[" + std::string(kSpaceSet) + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + std::string(kSpaceSet) + "]";
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(std::string_view pattern, bool literal) : pattern_(pattern) {
  const std::string translated = literal ? std::string(pattern) : translate_oniguruma(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  const uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), opts, &err, &off,
                             nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("tokenizer: unsupported regex \"", pattern, "\": ", reinterpret_cast<const char*>(msg), " at offset ", off);
  }
  // JIT is only an optimization; the interpreter gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.data, st.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    RINFER_CHECK(rc >= 0, "tokenizer: regex \"", pattern_, "\" failed on the input (PCRE2 error ", rc, ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t b = ov[0], e = ov[1];
    if (e == b) {
      // Empty match: skip one character so the scan always advances.
      if (b >= text.size()) break;
      size_t n = b + 1;
      while (n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) ++n;
      pos = n;
      continue;
    }
    out.emplace_back(b, e);
    pos = e;
  }
  return out;
}

std::string regex_replace(const Regex& re, std::string_view text, std::string_view content) {
  std::string out;
  size_t last = 0;
  for (auto [b, e] : re.find_all(text)) {
    out.append(text.substr(last, b - last));
    out.append(content);
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace rinfer

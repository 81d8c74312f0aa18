#include "tokenizer/utf8.h"

#include <string_view>

namespace rinfer::utf8 {

namespace {

// Expected length of a sequence from its first byte; 0 for bytes that can
// never start one (continuation bytes, C0/C1 overlong leads, F5..FF).
size_t sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

}  // namespace

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = sequence_length(c);
    if (len == 0 || i + len > n) return i;
    if (len == 1) {
      ++i;
      continue;
    }
    uint32_t cp = c & (0x7Fu >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return i;
    if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

size_t complete_prefix(std::string_view s) {
  const size_t n = s.size();
  // Only the last three bytes can belong to an unfinished sequence.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t len = sequence_length(c);
    return len > back ? n - back : n;
  }
  return n;
}

uint32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t l = sequence_length(c);
  if (l == 0 || i + l > s.size()) l = 1;  // not reached for valid input; never read past the end
  uint32_t cp = l == 1 ? c : c & (0x7Fu >> l);
  for (size_t k = 1; k < l; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  *len = l;
  return cp;
}

bool is_python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string_view lstrip(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    if (!is_python_space(decode_at(s, i, &len))) break;
    i += len;
  }
  return s.substr(i);
}

std::string_view rstrip(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    if (!is_python_space(decode_at(s, start, &len))) break;
    end = start;
  }
  return s.substr(0, end);
}

}  // namespace rinfer::utf8

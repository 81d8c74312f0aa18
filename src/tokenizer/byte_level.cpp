#include "tokenizer/byte_level.h"

#include <array>

namespace rinfer::byte_level {

namespace {

struct Tables {
  std::array<std::string, 256> utf8;  // byte -> UTF-8 of its code point
  std::array<int16_t, 324> byte_of;   // code point (< 324) -> byte, or -1
  Tables() {
    byte_of.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? uint32_t(b) : uint32_t(next++);
      byte_of[cp] = int16_t(b);
      std::string& s = utf8[size_t(b)];
      if (cp < 0x80) {
        s.push_back(char(cp));
      } else {
        s.push_back(char(0xC0 | (cp >> 6)));
        s.push_back(char(0x80 | (cp & 0x3F)));
      }
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

void encode(std::string_view s, std::string* out) {
  const Tables& t = tables();
  out->reserve(out->size() + s.size() * 2);
  for (char c : s) *out += t.utf8[static_cast<unsigned char>(c)];
}

int decode_char(uint32_t cp) { return cp < 324 ? tables().byte_of[cp] : -1; }

}  // namespace rinfer::byte_level

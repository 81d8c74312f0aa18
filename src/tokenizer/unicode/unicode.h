#pragma once
// Unicode operations the Hugging Face normalizers and added-token rules (and
// llama.cpp's WordPiece rules) need, on valid UTF-8, from tables generated
// out of the Unicode Character Database (gen_unicode_tables.py):
// NFC/NFD/NFKC/NFKD, lower-casing as Python's str.lower, the character
// classes of Rust's char methods, and general categories.
#include <cstdint>
#include <string>
#include <string_view>

namespace rinfer::unicode {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

std::string normalize(std::string_view s, NormalForm form);
std::string to_lower(std::string_view s);

// Rust char::is_whitespace (the White_Space property; U+0085 yes, U+FEFF no).
bool is_whitespace(uint32_t cp);
// Rust char::is_alphanumeric, approximated as general category L* or N*.
bool is_alphanumeric(uint32_t cp);

// The general category of a code point, by its first letter; Other is Cc, Cf,
// Co and Cs, Unassigned is Cn.
enum class Category : uint8_t { Unassigned, Letter, Mark, Number, Punctuation, Symbol, Separator, Other };
Category category(uint32_t cp);
// The first code point of cp's canonical decomposition (cp when it has none).
uint32_t nfd_first(uint32_t cp);
// The first code point of cp's lower-case form: its simple lower-case mapping.
uint32_t lower_first(uint32_t cp);

void append_utf8(uint32_t cp, std::string* out);

}  // namespace rinfer::unicode

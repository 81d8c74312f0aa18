#pragma once
// Unicode operations the Hugging Face normalizers and added-token rules need,
// on valid UTF-8, from tables generated out of the Unicode Character Database
// (gen_unicode_tables.py): NFC/NFD/NFKC/NFKD, lower-casing as Python's
// str.lower, and the character classes of Rust's char methods.
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

void append_utf8(uint32_t cp, std::string* out);

}  // namespace rinfer::unicode

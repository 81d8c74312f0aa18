#pragma once
// GPT-2's byte alphabet: every byte maps to one printable code point, so a
// byte-level BPE vocabulary is a set of ordinary strings. Bytes that are
// printable Latin-1 map to themselves; the other 68 map to U+0100 upwards.
#include <cstdint>
#include <string>
#include <string_view>

namespace rinfer::byte_level {

// Appends the byte-alphabet form of every byte of s.
void encode(std::string_view s, std::string* out);

// The byte a byte-alphabet code point stands for, or -1 if it is not one.
int decode_char(uint32_t cp);

}  // namespace rinfer::byte_level

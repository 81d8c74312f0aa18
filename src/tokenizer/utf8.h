#pragma once
// UTF-8 helpers shared by the tokenizer back-ends: strict validation of user
// text, where a stream of bytes may be cut without breaking a character, and
// Python's notion of whitespace (transformers strips with str.strip()).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rinfer::utf8 {

// Byte offset of the first byte that does not start a well-formed UTF-8
// sequence (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF),
// or npos when the whole string is valid.
size_t find_invalid(std::string_view s);

// Length of the longest prefix of s that does not end inside a multi-byte
// sequence which more bytes could still complete.
size_t complete_prefix(std::string_view s);

// Decodes the code point starting at s[i] (s must be valid UTF-8) and
// stores its length in *len.
uint32_t decode_at(std::string_view s, size_t i, size_t* len);

// Python's str.isspace() for one code point.
bool is_python_space(uint32_t cp);

// str.lstrip() / str.rstrip() with no argument, on valid UTF-8.
std::string_view lstrip(std::string_view s);
std::string_view rstrip(std::string_view s);

}  // namespace rinfer::utf8

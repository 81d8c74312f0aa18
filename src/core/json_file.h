#pragma once
// Reading JSON with one-line errors ("cannot read PATH: reason", "PATH is
// not valid JSON: ...") and one nesting budget: every config, index,
// manifest, tokenizer file and request rinfer parses goes through here.
// The parser's tree is freed (and printed) recursively, so a document
// nested 100,000 deep would overflow the stack; real ones nest a handful of
// levels (a JSON schema in a tool definition a few dozen).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rinfer {

inline constexpr int kMaxJsonDepth = 128;

// The deepest bracket nesting of a JSON text (brackets in strings skipped).
int json_depth(std::string_view text);
// Error "<what> nests deeper than 128 levels" when text does.
void check_json_depth(std::string_view text, const std::string& what);

// The parsed text, or a discarded value (is_discarded()) when it is not
// JSON or nests deeper than the budget: for input that is checked after.
nlohmann::json parse_json_or_discarded(std::string_view text);

nlohmann::json read_json_file(const std::string& path);
// What read_json_file does with the file's text; `what` (the path) names it
// in the errors.
nlohmann::json parse_json_text(std::string_view text, const std::string& what);

}  // namespace rinfer

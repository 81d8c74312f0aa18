#pragma once
// Jinja lexing, in two steps. split_template cuts the source into text,
// {{ expression }} and {% statement %} segments ({# comments #} vanish),
// applying whitespace control as transformers configures Jinja: "-" on a
// tag strips the whitespace next to it, trim_blocks drops the newline after
// a block tag, lstrip_blocks drops the indentation before one ("+" opts
// out). tokenize then splits an expression or statement into tokens.
#include <string>
#include <vector>

namespace rinfer::jinja {

struct Segment {
  enum Kind { Text, Expr, Stmt } kind;
  std::string text;  // the text, or the source between the delimiters
  int line;          // 1-based line of the segment's start, for errors
};

std::vector<Segment> split_template(const std::string& src);

struct Token {
  enum Kind { Name, String, Int, Float, Op, End } kind;
  std::string text;  // name, operator, decoded string, or number source
};

// Throws rinfer::Error ("chat template: line N: ...") on a bad character
// or an unterminated string.
std::vector<Token> tokenize(const std::string& src, int line);

}  // namespace rinfer::jinja

#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace rinfer::jinja {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int count_lines(const std::string& s, size_t from, size_t to) {
  return int(std::count(s.begin() + std::ptrdiff_t(from), s.begin() + std::ptrdiff_t(to), '\n'));
}

}  // namespace

std::vector<Segment> split_template(const std::string& src) {
  std::vector<Segment> out;
  size_t pos = 0;
  int line = 1;
  bool strip_next = false;  // the previous tag ended with "-"
  bool trim_next = false;   // the previous tag was a block or comment (trim_blocks)
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' &&
           src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string::npos && open + 1 >= src.size()) open = std::string::npos;
    std::string text = src.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    bool line_starting = pos == 0 || src[pos - 1] == '\n';
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && is_ws(text[k])) ++k;
      text.erase(0, k);
    } else if (trim_next) {
      if (text.starts_with("\n")) {
        text.erase(0, 1);
        line_starting = true;
      } else if (text.starts_with("\r\n")) {
        text.erase(0, 2);
        line_starting = true;
      }
    }
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Segment::Text, text, line});
      break;
    }
    const char kind = src[open + 1];
    const bool minus = open + 2 < src.size() && src[open + 2] == '-';
    const bool plus = open + 2 < src.size() && src[open + 2] == '+';
    if (minus) {
      while (!text.empty() && is_ws(text.back())) text.pop_back();
    } else if (kind != '{' && !plus) {
      // lstrip_blocks: spaces and tabs between a line start and the tag.
      const size_t nl = text.rfind('\n');
      const size_t k = nl == std::string::npos ? 0 : nl + 1;
      if ((nl != std::string::npos || line_starting) && text.find_first_not_of(" \t", k) == std::string::npos)
        text.erase(k);
    }
    if (!text.empty()) out.push_back({Segment::Text, text, line});
    line += count_lines(src, pos, open);
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t body = open + 2 + ((minus || plus) ? 1 : 0);
    const size_t end = src.find(close, body);
    RINFER_CHECK(end != std::string::npos, "chat template: line ", line, ": unclosed '", src.substr(open, 2), "'");
    size_t body_end = end;
    strip_next = body_end > body && src[body_end - 1] == '-';
    if (strip_next) --body_end;
    if (kind != '#')
      out.push_back({kind == '{' ? Segment::Expr : Segment::Stmt, src.substr(body, body_end - body), line});
    trim_next = kind != '{';
    line += count_lines(src, open, end);
    pos = end + 2;
    if (pos == src.size()) break;
  }
  return out;
}

std::vector<Token> tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_ws(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Name, s.substr(i, j - i)});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string num = s.substr(i, j - i);
      num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
      out.push_back({is_float ? Token::Float : Token::Int, num});
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          v += s[j];
          continue;
        }
        const char e = s[++j];
        switch (e) {
          case 'n': v += '\n'; break;
          case 't': v += '\t'; break;
          case 'r': v += '\r'; break;
          case '\\': v += '\\'; break;
          case '\'': v += '\''; break;
          case '"': v += '"'; break;
          case '\n': break;  // line continuation
          default:
            v += '\\';
            v += e;
        }
      }
      RINFER_CHECK(j < s.size(), "chat template: line ", line, ": unterminated string");
      out.push_back({Token::String, v});
      i = j + 1;
      continue;
    }
    static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                                 "(",  ")",  "[",  "]",  "{",  "}",  ",", ".", ":", "|"};
    bool matched = false;
    for (const char* op : kOps) {
      const std::string_view o(op);
      if (s.compare(i, o.size(), o) == 0) {
        out.push_back({Token::Op, std::string(o)});
        i += o.size();
        matched = true;
        break;
      }
    }
    RINFER_CHECK(matched, "chat template: line ", line, ": unexpected character '", std::string(1, c), "'");
  }
  out.push_back({Token::End, ""});
  return out;
}

}  // namespace rinfer::jinja

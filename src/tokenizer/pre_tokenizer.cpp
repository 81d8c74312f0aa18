#include "tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer regex (ByteLevel with use_regex = true).
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& s) {
  if (s == "Removed") return Behavior::Removed;
  if (s == "Isolated") return Behavior::Isolated;
  if (s == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::MergedWithNext;
  if (s == "Contiguous") return Behavior::Contiguous;
  fail("tokenizer: unsupported split behavior \"", s, "\"");
}

// Cuts `text` at the delimiter ranges as the tokenizers library's
// NormalizedString::split does; appends the non-empty parts to out.
void split_by(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches, Behavior behavior,
              bool invert, std::vector<std::string>* out) {
  struct Part {
    size_t b, e;
    bool delim;
  };
  std::vector<Part> parts;  // covers the whole text
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last) parts.push_back({last, b, invert});
    parts.push_back({b, e, !invert});
    last = e;
  }
  if (last < text.size()) parts.push_back({last, text.size(), invert});

  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
    case Behavior::Removed:
      for (const Part& p : parts)
        if (!p.delim) ranges.emplace_back(p.b, p.e);
      break;
    case Behavior::Isolated:
      for (const Part& p : parts) ranges.emplace_back(p.b, p.e);
      break;
    case Behavior::Contiguous:
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].delim && i > 0 && parts[i - 1].delim)
          ranges.back().second = parts[i].e;
        else
          ranges.emplace_back(parts[i].b, parts[i].e);
      }
      break;
    case Behavior::MergedWithPrevious:
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].delim && i > 0 && !parts[i - 1].delim)
          ranges.back().second = parts[i].e;
        else
          ranges.emplace_back(parts[i].b, parts[i].e);
      }
      break;
    case Behavior::MergedWithNext: {
      bool pending = false;  // the last range is a delimiter waiting for its next part
      for (const Part& p : parts) {
        if (pending && !p.delim) {
          ranges.back().second = p.e;
          pending = false;
        } else {
          ranges.emplace_back(p.b, p.e);
          pending = p.delim;
        }
      }
      break;
    }
  }
  for (auto [b, e] : ranges)
    if (e > b) out->emplace_back(text.substr(b, e - b));
}

class Split final : public PreTokenizer {
 public:
  Split(std::unique_ptr<Regex> re, Behavior b, bool invert) : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void apply(PreTokenized& pt) const override {
    std::vector<std::string> out;
    out.reserve(pt.pieces.size() * 2);
    for (const std::string& p : pt.pieces) split_by(p, re_->find_all(p), behavior_, invert_, &out);
    pt.pieces = std::move(out);
  }

 private:
  std::unique_ptr<Regex> re_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), re_(use_regex ? std::make_unique<Regex>(kGpt2Regex) : nullptr) {}
  void apply(PreTokenized& pt) const override {
    std::vector<std::string> out;
    out.reserve(pt.pieces.size());
    for (std::string& p : pt.pieces) {
      if (add_prefix_space_ && !p.starts_with(' ')) p.insert(0, " ");
      if (re_)
        split_by(p, re_->find_all(p), Behavior::Isolated, false, &out);
      else
        out.push_back(std::move(p));
    }
    for (std::string& p : out) {
      std::string mapped;
      byte_level::encode(p, &mapped);
      p = std::move(mapped);
    }
    pt.pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  Metaspace(std::string replacement, Prepend scheme, bool split)
      : rep_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void apply(PreTokenized& pt) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < pt.pieces.size(); ++i) {
      std::string s;
      for (char c : pt.pieces[i]) {
        if (c == ' ')
          s += rep_;
        else
          s += c;
      }
      const bool prepend = scheme_ == Prepend::Always || (scheme_ == Prepend::First && i == 0 && pt.first_at_start);
      if (prepend && !s.starts_with(rep_)) s.insert(0, rep_);
      if (!split_) {
        out.push_back(std::move(s));
        continue;
      }
      // Split before each replacement character (MergedWithNext).
      size_t start = 0;
      for (size_t pos = s.find(rep_, 1); pos != std::string::npos; pos = s.find(rep_, pos + 1)) {
        if (pos > start) out.push_back(s.substr(start, pos - start));
        start = pos;
      }
      if (start < s.size()) out.push_back(s.substr(start));
    }
    pt.pieces = std::move(out);
  }

 private:
  std::string rep_;
  Prepend scheme_;
  bool split_;
};

std::unique_ptr<PreTokenizer> regex_split(const char* re, Behavior b) {
  return std::make_unique<Split>(std::make_unique<Regex>(re), b, false);
}

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> v) : items_(std::move(v)) {}
  void apply(PreTokenized& pt) const override {
    for (const auto& p : items_) p->apply(pt);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_isolated_split(const std::string& regex) {
  return std::make_unique<Split>(std::make_unique<Regex>(regex), Behavior::Isolated, false);
}

std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevel>(add_prefix_space, use_regex);
}

std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> items) {
  return std::make_unique<Sequence>(std::move(items));
}

std::unique_ptr<PreTokenizer> make_bert_pre_tokenizer() {
  // Whitespace removed, then every punctuation character (Unicode P* or
  // ASCII punctuation, which includes symbols such as $ + < = > ^ ` | ~) on
  // its own.
  std::vector<std::unique_ptr<PreTokenizer>> v;
  v.push_back(regex_split(R"(\s+)", Behavior::Removed));
  v.push_back(regex_split(R"([\p{P}!-/:-@\[-`{-~])", Behavior::Isolated));
  return make_sequence(std::move(v));
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, "pre_tokenizer");
  if (type == "Split") {
    return std::make_unique<Split>(json_pattern(j, "pattern"), parse_behavior(json_string(j, "behavior")),
                                   json_bool(j, "invert", false));
  }
  if (type == "ByteLevel")
    return make_byte_level(json_bool(j, "add_prefix_space", true), json_bool(j, "use_regex", true));
  if (type == "Metaspace") {
    const std::string rep = j.contains("replacement") ? json_string(j, "replacement") : std::string(kMetaspace);
    RINFER_CHECK(!rep.empty() && utf8::find_invalid(rep) == std::string::npos,
                 "tokenizer: Metaspace replacement must be one character");
    Metaspace::Prepend scheme = Metaspace::Prepend::Always;
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string()) {
      const std::string s = it->get<std::string>();
      if (s == "first")
        scheme = Metaspace::Prepend::First;
      else if (s == "never")
        scheme = Metaspace::Prepend::Never;
      else
        RINFER_CHECK(s == "always", "tokenizer: unsupported Metaspace prepend_scheme \"", s, "\"");
    } else if (!json_bool(j, "add_prefix_space", true)) {
      scheme = Metaspace::Prepend::Never;  // files written before prepend_scheme existed
    }
    return std::make_unique<Metaspace>(rep, scheme, json_bool(j, "split", true));
  }
  // Rust's char::is_numeric is the N categories.
  if (type == "Digits")
    return regex_split(json_bool(j, "individual_digits", false) ? "\\p{N}" : "\\p{N}+", Behavior::Isolated);
  if (type == "Whitespace") return regex_split(R"(\w+|[^\w\s]+)", Behavior::Isolated);
  if (type == "WhitespaceSplit") return regex_split(R"(\s+)", Behavior::Removed);
  if (type == "Punctuation") {
    const std::string b = j.contains("behavior") ? json_string(j, "behavior") : "Isolated";
    return regex_split(R"(\p{P}|[$+<=>^`|~])", parse_behavior(b));
  }
  if (type == "BertPreTokenizer") return make_bert_pre_tokenizer();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> v;
    for (const auto& e : json_array(j, "pretokenizers"))
      if (auto p = make_pre_tokenizer(e)) v.push_back(std::move(p));
    return make_sequence(std::move(v));
  }
  fail("tokenizer: unsupported pre_tokenizer type \"", type, "\"");
}

}  // namespace rinfer

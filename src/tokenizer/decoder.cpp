#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace {

using nlohmann::json;
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";
constexpr std::string_view kMetaspace = "\xE2\x96\x81";

class ByteLevelDec final : public PieceDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      // A token with a character outside the byte alphabet (an added token
      // such as "<｜begin▁of▁sentence｜>") is taken as its own UTF-8 bytes.
      const size_t start = bytes.size();
      for (size_t i = 0; i < t.size();) {
        size_t len = 0;
        const int b = byte_level::decode_char(utf8::decode_at(t, i, &len));
        if (b < 0) {
          bytes.resize(start);
          bytes += t;
          break;
        }
        bytes.push_back(char(b));
        i += len;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDec final : public PieceDecoder {
 public:
  MetaspaceDec(std::string rep, bool prepend) : rep_(std::move(rep)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string s;
      const std::string& t = tokens[i];
      for (size_t p = 0; p < t.size();) {
        if (t.compare(p, rep_.size(), rep_) == 0) {
          s += ' ';
          p += rep_.size();
        } else {
          s += t[p++];
        }
      }
      if (i == 0 && prepend_ && s.starts_with(' ')) s.erase(0, 1);
      tokens[i] = std::move(s);
    }
  }

 private:
  std::string rep_;
  bool prepend_;
};

// "<0xAB>" → 0xAB, or -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

class ByteFallbackDec final : public PieceDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8::find_invalid(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementChar);  // one per byte
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      if (const int b = byte_token(t); b >= 0) {
        pending.push_back(char(b));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDec final : public PieceDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character.
class StripDec final : public PieceDecoder {
 public:
  StripDec(std::string c, int64_t start, int64_t stop) : c_(std::move(c)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      for (int64_t k = 0; k < start_ && t.starts_with(c_); ++k) t.erase(0, c_.size());
      for (int64_t k = 0; k < stop_ && t.ends_with(c_); ++k) t.resize(t.size() - c_.size());
    }
  }

 private:
  std::string c_;
  int64_t start_, stop_;
};

class ReplaceDec final : public PieceDecoder {
 public:
  ReplaceDec(std::unique_ptr<Regex> re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = regex_replace(*re_, t, content_);
  }

 private:
  std::unique_ptr<Regex> re_;
  std::string content_;
};

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size())) s.replace(i, from.size(), to);
  return s;
}

// Joins word pieces: "##ing" continues the previous token, anything else
// starts a new word after a space. With cleanup (the default) each token
// then gets the tokenizers library's wordpiece clean-up (" ." → ".", ...).
class WordPieceDec final : public PieceDecoder {
 public:
  WordPieceDec(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
        {" .", "."},     {" ?", "?"},   {" !", "!"},           {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
        {" 'm", "'m"},   {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i > 0) {
        if (t.starts_with(prefix_))
          t.erase(0, prefix_.size());
        else
          t.insert(0, " ");
      }
      if (cleanup_)
        for (const auto& [from, to] : kRules) t = replace_all(std::move(t), from, to);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class SequenceDec final : public PieceDecoder {
 public:
  explicit SequenceDec(std::vector<std::unique_ptr<PieceDecoder>> v) : items_(std::move(v)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<PieceDecoder>> items_;
};

}  // namespace

std::string utf8_lossy(std::string_view s) {
  if (utf8::find_invalid(s) == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const size_t bad = utf8::find_invalid(s.substr(i));
    if (bad == std::string_view::npos) {
      out.append(s.substr(i));
      break;
    }
    out.append(s.substr(i, bad));
    i += bad;
    // The longest prefix of a well-formed sequence is one error (Unicode's
    // "maximal subpart" rule, which Rust follows): the lead byte plus the
    // continuation bytes that fit its ranges.
    const auto c = static_cast<unsigned char>(s[i]);
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    size_t j = i + 1;
    for (size_t k = 0; k < need && j < s.size(); ++k, ++j) {
      const auto d = static_cast<unsigned char>(s[j]);
      if (d < (k == 0 ? lo : 0x80) || d > (k == 0 ? hi : 0xBF)) break;
    }
    out.append(kReplacementChar);
    i = j;
  }
  return out;
}

std::unique_ptr<PieceDecoder> make_byte_level_decoder() { return std::make_unique<ByteLevelDec>(); }

std::unique_ptr<PieceDecoder> make_wordpiece_decoder(const std::string& prefix, bool cleanup) {
  return std::make_unique<WordPieceDec>(prefix, cleanup);
}

std::unique_ptr<PieceDecoder> make_sentencepiece_decoder(bool strip_prefix) {
  std::vector<std::unique_ptr<PieceDecoder>> v;
  v.push_back(std::make_unique<ReplaceDec>(std::make_unique<Regex>(kMetaspace, true), " "));
  v.push_back(std::make_unique<ByteFallbackDec>());
  v.push_back(std::make_unique<FuseDec>());
  if (strip_prefix) v.push_back(std::make_unique<StripDec>(" ", 1, 0));
  return std::make_unique<SequenceDec>(std::move(v));
}

std::unique_ptr<PieceDecoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, "decoder");
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "Metaspace") {
    const std::string rep = j.contains("replacement") ? json_string(j, "replacement") : std::string(kMetaspace);
    bool prepend = true;
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string())
      prepend = it->get<std::string>() != "never";
    else
      prepend = json_bool(j, "add_prefix_space", true);
    return std::make_unique<MetaspaceDec>(rep, prepend);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip")
    return std::make_unique<StripDec>(json_string(j, "content"), json_int(j, "start", 0), json_int(j, "stop", 0));
  if (type == "Replace") return std::make_unique<ReplaceDec>(json_pattern(j, "pattern"), json_string(j, "content"));
  if (type == "WordPiece")
    return make_wordpiece_decoder(j.contains("prefix") ? json_string(j, "prefix") : "##",
                                  json_bool(j, "cleanup", true));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PieceDecoder>> v;
    for (const auto& e : json_array(j, "decoders"))
      if (auto d = make_decoder(e)) v.push_back(std::move(d));
    return std::make_unique<SequenceDec>(std::move(v));
  }
  fail("tokenizer: unsupported decoder type \"", type, "\"");
}

}  // namespace rinfer

#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode/unicode.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace {

using nlohmann::json;

class UnicodeNorm final : public Normalizer {
 public:
  explicit UnicodeNorm(unicode::NormalForm f) : form_(f) {}
  void normalize(std::string& t) const override { t = unicode::normalize(t, form_); }

 private:
  unicode::NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& t) const override { t = unicode::to_lower(t); }
};

// Strips Rust whitespace (char::is_whitespace) from either end.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& t) const override {
    size_t b = 0, e = t.size();
    if (left_) {
      while (b < e) {
        size_t len = 0;
        if (!unicode::is_whitespace(utf8::decode_at(t, b, &len))) break;
        b += len;
      }
    }
    if (right_) {
      while (e > b) {
        size_t s = e - 1;
        while (s > b && (static_cast<unsigned char>(t[s]) & 0xC0) == 0x80) --s;
        size_t len = 0;
        if (!unicode::is_whitespace(utf8::decode_at(t, s, &len))) break;
        e = s;
      }
    }
    t = t.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void normalize(std::string& t) const override {
    if (!t.empty()) t.insert(0, prepend_);  // an empty string stays empty
  }

 private:
  std::string prepend_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::unique_ptr<Regex> re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void normalize(std::string& t) const override { t = regex_replace(*re_, t, content_); }

 private:
  std::unique_ptr<Regex> re_;
  std::string content_;
};

// BertNormalizer, as the tokenizers library: clean_text drops NUL, U+FFFD
// and control characters (category C*, but not \t \n \r) and turns
// whitespace into " "; handle_chinese_chars puts spaces around CJK
// ideographs; strip_accents (default: as lowercase) is NFD then dropping
// nonspacing marks (Mn); lowercase last.
class BertNorm final : public Normalizer {
 public:
  BertNorm(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_(clean_text), chinese_(chinese), strip_(strip_accents), lower_(lowercase),
        control_(R"([\x{0}\x{FFFD}]|(?![\t\n\r])\p{C})"), space_(R"(\s)"), mark_(R"(\p{Mn})") {}
  void normalize(std::string& t) const override {
    if (clean_) t = regex_replace(space_, regex_replace(control_, t, ""), " ");
    if (chinese_) {
      std::string out;
      out.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        size_t len = 0;
        const uint32_t cp = utf8::decode_at(t, i, &len);
        const bool cjk = (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
                         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
                         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
                         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
        if (cjk) out += ' ';
        out.append(t, i, len);
        if (cjk) out += ' ';
        i += len;
      }
      t = std::move(out);
    }
    if (strip_) t = regex_replace(mark_, unicode::normalize(t, unicode::NormalForm::NFD), "");
    if (lower_) t = unicode::to_lower(t);
  }

 private:
  bool clean_, chinese_, strip_, lower_;
  Regex control_, space_, mark_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> v) : items_(std::move(v)) {}
  void normalize(std::string& t) const override {
    for (const auto& n : items_) n->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> make_sentencepiece_normalizer(bool add_prefix) {
  std::vector<std::unique_ptr<Normalizer>> v;
  if (add_prefix) v.push_back(std::make_unique<Prepend>("\xE2\x96\x81"));
  v.push_back(std::make_unique<Replace>(std::make_unique<Regex>(" ", true), "\xE2\x96\x81"));
  return std::make_unique<Sequence>(std::move(v));
}

std::unique_ptr<Normalizer> make_bert_normalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents,
                                                 bool lowercase) {
  return std::make_unique<BertNorm>(clean_text, handle_chinese_chars, strip_accents, lowercase);
}

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNorm>(unicode::NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(unicode::NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(unicode::NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(unicode::NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(json_bool(j, "strip_left", true), json_bool(j, "strip_right", true));
  if (type == "Prepend") return std::make_unique<Prepend>(json_string(j, "prepend"));
  if (type == "Replace") return std::make_unique<Replace>(json_pattern(j, "pattern"), json_string(j, "content"));
  if (type == "BertNormalizer") {
    const bool lower = json_bool(j, "lowercase", true);
    return make_bert_normalizer(json_bool(j, "clean_text", true), json_bool(j, "handle_chinese_chars", true),
                                json_bool(j, "strip_accents", lower), lower);
  }
  if (type == "Precompiled")
    fail("tokenizer: unsupported normalizer type \"Precompiled\" (SentencePiece's compiled normalization rules)");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> v;
    for (const auto& e : json_array(j, "normalizers"))
      if (auto n = make_normalizer(e)) v.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(v));
  }
  fail("tokenizer: unsupported normalizer type \"", type, "\"");
}

}  // namespace rinfer

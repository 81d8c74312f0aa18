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
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> v;
    for (const auto& e : json_array(j, "normalizers"))
      if (auto n = make_normalizer(e)) v.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(v));
  }
  fail("tokenizer: unsupported normalizer type \"", type, "\"");
}

}  // namespace rinfer

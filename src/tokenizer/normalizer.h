#pragma once
// tokenizer.json normalizers: NFC/NFD/NFKC/NFKD, Lowercase, Strip, Prepend,
// Replace, BertNormalizer, Sequence (null: none). Only the normalized text is kept: rinfer
// needs ids, not offsets into the original string.
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace rinfer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// null → nullptr. Unknown types throw rinfer::Error naming them.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);
// Prepend "▁" then Replace " " → "▁": LLaMA-2's tokenizer.json normalizer.
std::unique_ptr<Normalizer> make_sentencepiece_normalizer(bool add_prefix);
// BertNormalizer (strip_accents: pass `lowercase` where the file has null).
std::unique_ptr<Normalizer> make_bert_normalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents,
                                                 bool lowercase);

}  // namespace rinfer

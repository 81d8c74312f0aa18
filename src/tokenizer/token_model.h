#pragma once
// The model stage of the tokenizers pipeline: one pre-token (a "word") →
// ids. Implemented by BPE (bpe_model.h, also tiktoken vocabularies),
// WordPiece (wordpiece_model.h) and Unigram (unigram_model.h).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rinfer {

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the ids of `word` to *out.
  virtual void encode(std::string_view word, std::vector<int32_t>* out) const = 0;
  virtual int32_t token_to_id(std::string_view token) const = 0;  // -1 if absent
  // nullptr for an id the model does not have (a hole, or an added token).
  virtual const std::string* id_to_token(int32_t id) const = 0;
  virtual int32_t size() const = 0;
};

}  // namespace rinfer

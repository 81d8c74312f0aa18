#pragma once
// The WordPiece model of tokenizer.json (BERT; also GGUF "bert"
// vocabularies): a word becomes the longest vocabulary token at its start,
// then the longest "##"-prefixed token at each following position; a word
// with a position no token covers, or longer than max_input_chars_per_word
// characters, is the unk token as a whole (the tokenizers library's rules).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"  // TokenMap
#include "tokenizer/token_model.h"

namespace rinfer {

class WordPieceModel final : public TokenModel {
 public:
  // Throws rinfer::Error when unk_token is not in vocab.
  WordPieceModel(TokenMap vocab, const std::string& unk_token, std::string continuing_subword_prefix,
                 size_t max_input_chars_per_word);

  void encode(std::string_view word, std::vector<int32_t>* out) const override;
  int32_t token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  int32_t size() const override { return int32_t(tokens_.size()); }

 private:
  TokenMap vocab_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  int32_t unk_id_;
  std::string prefix_;
  size_t max_chars_;
  size_t max_token_bytes_ = 0;
};

}  // namespace rinfer

#pragma once
// The Unigram model of tokenizer.json (SentencePiece unigram, e.g. T5,
// ALBERT, XLNet as converted by transformers): the segmentation of a word
// into vocabulary pieces with the highest total score (Viterbi, as the
// tokenizers library's encode_optimized). A character no piece starts with
// is unknown, scored min_score - 10; runs of unknown characters fuse into
// one unk token, or become <0xXX> byte tokens with byte_fallback.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/bpe_model.h"  // TokenMap
#include "tokenizer/token_model.h"

namespace rinfer {

class UnigramModel final : public TokenModel {
 public:
  // pieces[id] = (piece, score). unk_id -1: none (an unknown character is
  // then an error, as in the tokenizers library).
  UnigramModel(std::vector<std::pair<std::string, double>> pieces, int32_t unk_id, bool byte_fallback);

  void encode(std::string_view word, std::vector<int32_t>* out) const override;
  int32_t token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  int32_t size() const override { return int32_t(pieces_.size()); }

 private:
  std::vector<std::pair<std::string, double>> pieces_;
  TokenMap vocab_;
  int32_t unk_id_;
  bool byte_fallback_;
  double min_score_;
  // A byte trie of the pieces: (node << 8 | byte) → child; token id per node.
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> node_token_{-1};
};

}  // namespace rinfer

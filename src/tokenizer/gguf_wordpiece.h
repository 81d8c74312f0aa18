#pragma once
// WordPiece as llama.cpp runs a GGUF "bert" vocabulary (llm_tokenizer_wpm),
// which is not Hugging Face's BertNormalizer + WordPiece:
//   * text preparation (a pre-tokenizer here): a character's decomposition
//     is cut to its first code point (a Hangul syllable keeps only its
//     leading consonant), every mark (Mn, Mc, Me) is dropped, not only Mn,
//     U+0085, \v, \f and the line and paragraph separators split words
//     instead of vanishing, unassigned code points stay, lower-casing is
//     the simple one-to-one mapping;
//   * matching: "▁" + word, then the longest GGUF token text at each
//     position (word-initial pieces carry "▁", continuations nothing), with
//     no limit on the word's length; a word with a position no token covers
//     is the unk token.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"  // TokenMap
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_model.h"
#include "tokenizer/wordpiece_model.h"

namespace rinfer {

std::unique_ptr<PreTokenizer> make_llamacpp_wordpiece_pre_tokenizer(bool lowercase, bool strip_accents);

class LlamaCppWordPiece final : public TokenModel {
 public:
  // gguf_tokens: the file's token texts, matched against the text.
  // pieces: the same ids in Hugging Face's form ("##" continuations), which
  // token_to_id / id_to_token (and so the WordPiece decoder) use.
  LlamaCppWordPiece(const std::vector<std::string>& gguf_tokens, TokenMap pieces, const std::string& unk_token);

  void encode(std::string_view word, std::vector<int32_t>* out) const override;
  int32_t token_to_id(std::string_view token) const override { return pieces_.token_to_id(token); }
  const std::string* id_to_token(int32_t id) const override { return pieces_.id_to_token(id); }
  int32_t size() const override { return pieces_.size(); }

 private:
  TokenMap match_;
  size_t max_token_bytes_ = 0;
  WordPieceModel pieces_;
  int32_t unk_id_;
};

}  // namespace rinfer

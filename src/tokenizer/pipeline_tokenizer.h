#pragma once
// The Tokenizer built from the stages of the Hugging Face tokenizers
// library: added tokens → normalizer → pre-tokenizer → model (BPE, WordPiece,
// Unigram) → post-processor for encode; ids → token strings → decoder (→ transformers'
// clean-up) for decode. tokenizer.json and GGUF vocabularies both load into
// it.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_model.h"
#include "tokenizer/tokenizer.h"

namespace rinfer {

struct TokenizerPipeline {
  AddedVocabulary added;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<TokenModel> model;  // BPE, WordPiece or Unigram
  PostProcessor post;  // what add_special adds
  std::unique_ptr<PieceDecoder> decoder;
  int32_t bos = -1, eos = -1;
  std::vector<int32_t> eos_ids;  // eos first, then the config's extra ids
  bool clean_up_tokenization_spaces = false;
  bool split_special_tokens = false;  // encode() leaves special-token text as text
};

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(TokenizerPipeline p);

// transformers' clean_up_tokenization: " ." → "." and nine more.
std::string clean_up_tokenization(std::string text);

}  // namespace rinfer

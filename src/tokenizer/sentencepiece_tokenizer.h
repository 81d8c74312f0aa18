#pragma once
// SentencePiece back-end: tokenizer.model through libsentencepiece, with the
// added/special-token handling of transformers' (slow) LlamaTokenizer.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/hf_config.h"
#include "tokenizer/tokenizer.h"

namespace rinfer {

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::filesystem::path& model_file,
                                                        const HfTokenizerConfig& cfg);

// Every piece of a SentencePiece model with its score and type, for
// exporting the vocabulary (GGUF tokenizer.ggml.*). Types use
// SentencePiece's numbering, which GGUF shares: 1 normal, 2 unknown,
// 3 control, 5 unused, 6 byte (libsentencepiece 0.1.x has no query for
// user-defined pieces: they read as normal, as in llama.cpp's converter).
struct SentencePieceVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  int32_t unk_id = -1, bos_id = -1, eos_id = -1;
  bool byte_fallback = false;
};
SentencePieceVocab read_sentencepiece_vocab(const std::filesystem::path& model_file);

}  // namespace rinfer

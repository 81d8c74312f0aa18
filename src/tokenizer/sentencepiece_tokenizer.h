#pragma once
// SentencePiece back-end: tokenizer.model through libsentencepiece, with the
// added/special-token handling of transformers' (slow) LlamaTokenizer.
#include <filesystem>
#include <memory>

#include "tokenizer/hf_config.h"
#include "tokenizer/tokenizer.h"

namespace rinfer {

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::filesystem::path& model_file,
                                                        const HfTokenizerConfig& cfg);

}  // namespace rinfer

#pragma once
// GGUF vocabularies (the tokenizer.ggml.* metadata of a llama.cpp model
// file, e.g. llama.cpp's ggml-vocab-*.gguf test files) as a Tokenizer:
//   tokenizer.ggml.model "llama": SentencePiece BPE by scores, byte
//     fallback, "▁" for spaces (the pipeline of LLaMA-2's tokenizer.json);
//   tokenizer.ggml.model "gpt2": byte-level BPE from tokenizer.ggml.merges
//     with the pre-tokenizer of tokenizer.ggml.pre;
//   tokenizer.ggml.model "bert": WordPiece with BERT's uncased normalizer
//     and pre-tokenizer, [CLS] ... [SEP] with special tokens.
// Token types: CONTROL and UNKNOWN tokens are special (matched in text only
// when special tokens are parsed); USER_DEFINED tokens are always matched.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rinfer {

// The metadata key/value pairs of a GGUF file (tensor data is not read).
// Integers of every width read as int64, floats as double.
struct GgufMetadata {
  using Value = std::variant<int64_t, double, bool, std::string, std::vector<std::string>, std::vector<int64_t>,
                             std::vector<double>>;
  std::map<std::string, Value> kv;
};

GgufMetadata read_gguf_metadata(const std::filesystem::path& file);

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& file);

}  // namespace rinfer

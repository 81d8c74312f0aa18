#pragma once
// GGUF vocabularies (the tokenizer.ggml.* metadata of a llama.cpp model
// file, e.g. llama.cpp's ggml-vocab-*.gguf test files) as a Tokenizer that
// gives llama.cpp's ids (tests/data/tokenizer_vectors):
//   tokenizer.ggml.model "llama": SentencePiece BPE by scores, byte
//     fallback, "▁" for spaces (the pipeline of LLaMA-2's tokenizer.json);
//   tokenizer.ggml.model "gpt2": byte-level BPE from tokenizer.ggml.merges
//     with llama.cpp's pre-tokenizer regexes for tokenizer.ggml.pre;
//   tokenizer.ggml.model "bert": llama.cpp's WordPiece (gguf_wordpiece.h),
//     [CLS] ... [SEP] with special tokens.
// Token types: CONTROL and UNKNOWN tokens are special (matched in text only
// when special tokens are parsed); USER_DEFINED tokens are always matched.
// The types are the file's after llama.cpp's rules by token text (e.g. an
// end-of-generation text such as "</s>" is CONTROL).
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

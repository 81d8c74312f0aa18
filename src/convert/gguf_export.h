#pragma once
// rinfer export-gguf: a Hugging Face checkpoint as a llama.cpp GGUF file, so
// that the same weights can be run and measured on llama.cpp next to rinfer
// (scripts/bench_llamacpp.sh). Families: LlamaForCausalLM and
// MistralForCausalLM (GGUF arch "llama"; q/k rows are put back into the
// interleaved rotary order llama.cpp's "llama" RoPE expects) and
// Qwen2ForCausalLM ("qwen2", q/k/v biases). Vocabulary: a SentencePiece
// tokenizer.model (tokenizer.ggml.model "llama").
// Matrices take the chosen type (f32, f16, q8_0, q4_0; a matrix whose rows
// are not a multiple of 32 falls back to f16, as llama.cpp's converter
// does), norms and biases stay f32. Streamed: one tensor in memory at a time.
#include <cstdint>
#include <optional>
#include <string>

#include <vector>

#include "io/gguf_writer.h"
#include "tokenizer/hf_config.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace rinfer {

struct GgufExportOptions {
  io::GgmlType type = io::GgmlType::Q8_0;
  // The output layer's type (lm_head; tied embeddings get an own copy only
  // when this differs from the token embedding's type); default: type.
  std::optional<io::GgmlType> output_type;
  bool progress = false;
};

struct GgufExportStats {
  uint64_t bytes_out = 0;
  // Weight bytes one decode step reads: every matrix, norm and bias except
  // the token embedding table (one row per token).
  uint64_t bytes_per_token = 0;
  int64_t f16_fallbacks = 0;  // matrices kept f16 (rows not a multiple of 32)
  double seconds = 0.0;
};

// Names of the supported types, for the CLI ("f32", "f16", "q8_0", "q4_0").
std::optional<io::GgmlType> gguf_type_from_name(const std::string& name);

// tokenizer.ggml.tokens / scores / token_type of vocab_size entries: the
// SentencePiece pieces, then the tokens the HF tokenizer config adds past
// them (type 3 CONTROL when special, else 4 USER_DEFINED; score -1000), then
// "[PAD<id>]" (5 UNUSED) up to vocab_size, as llama.cpp's converter fills it.
struct GgufVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
};
GgufVocab gguf_llama_vocab(const SentencePieceVocab& sp, const HfTokenizerConfig& cfg, int64_t vocab_size);

GgufExportStats export_gguf(const std::string& hf_dir, const std::string& out_path, const GgufExportOptions& opt);

}  // namespace rinfer

#pragma once
// `rinfer synth`: Hugging Face-layout checkpoints with seeded random weights
// and the exact shapes of real models, for benchmarks, memory estimates and
// `make run` when no real model is at hand. Their text is nonsense by design.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace rinfer {

struct SynthPreset {
  std::string name;
  std::string family;  // "llama", "qwen2"
  std::string description;
  nlohmann::json config;  // HF config.json
};

const std::vector<SynthPreset>& synth_presets();
const SynthPreset& find_synth_preset(const std::string& name);  // error lists the presets

struct SynthOptions {
  std::string preset = "tiny";
  std::string family;  // optional: must match the preset's family
  std::string out;
  DType dtype = DType::BF16;
  uint64_t seed = 1;
  uint64_t max_shard_bytes = uint64_t(2) << 30;  // shard like save_pretrained does
  int64_t layers = 0;  // > 0: override the layer count (same per-layer shapes)
  bool fp8 = false;    // projection matrices as block-scaled FP8 e4m3 (DeepSeek-V3 style)
};

// Writes config.json, model*.safetensors (+ index when sharded), a
// SentencePiece tokenizer.model of the preset's vocabulary size and the HF
// tokenizer/generation configs. The directory appears only when complete.
void synth_checkpoint(const SynthOptions& opts);

// A SentencePiece BPE ModelProto (byte fallback, <unk> <s> </s>) with
// vocab_size pieces built from letters, serialized as protobuf bytes.
std::string synth_sentencepiece_model(int64_t vocab_size);

}  // namespace rinfer

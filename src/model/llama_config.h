#pragma once
// Config keys shared by LLaMA-style families (LLaMA, Mistral, Qwen2, ...).
#include <nlohmann/json.hpp>

#include "model/model_config.h"

namespace rinfer {

// Sizes, norms, RoPE (incl. rope_scaling linear / dynamic / llama3), tied
// embeddings and special ids. Biases are left to the family.
void parse_llama_common(const nlohmann::json& hf_config, ModelConfig& c);

}  // namespace rinfer

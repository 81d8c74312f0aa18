#pragma once
// Tensor specs and builders for MoE feed-forward layers in HF layouts:
// router "<prefix><router>.weight" [E, H] (kept in f32), experts
// "<prefix>experts.<e>.<gate|up|down>", optional shared experts and gate.
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/moe.h"

namespace rinfer {

struct MoeNames {
  std::string router = "gate";           // router weight name under the prefix
  const char* gate = "gate_proj";        // expert projections
  const char* up = "up_proj";
  const char* down = "down_proj";
  std::string shared;                    // shared-expert prefix ("shared_expert", "shared_experts") or empty
  std::string shared_gate;               // sigmoid gate of the shared expert or empty
  std::string correction_bias;           // selection bias name under the prefix or empty
};

struct MoeShape {
  int64_t hidden = 0, expert_inter = 0, shared_inter = 0;
};

std::vector<TensorSpec> moe_specs(const std::string& prefix, const MoeRouting& r, const MoeShape& s,
                                  const MoeNames& n);
// shard: the rank's part of every expert's width (moe.h); the router and
// the shared expert's gate are replicated. With expert parallelism
// (shard.ep_world > 1) the rank holds whole experts: those shard.experts
// places on it in decoder layer `layer`.
std::unique_ptr<FeedForwardBlock> make_moe(const WeightStore& w, const std::string& prefix, const MoeRouting& r,
                                           const MoeShape& s, const MoeNames& n, const Shard& shard = {},
                                           int64_t layer = 0);

// MoE hyper-parameters are kept in ModelConfig::family["moe"].
nlohmann::json moe_to_json(const MoeRouting& r, const MoeShape& s);
struct MoeConfig {
  MoeRouting routing;
  MoeShape shape;
};
MoeConfig moe_config(const ModelConfig& c);  // from c.family["moe"], hidden = c.hidden_size

// A LLaMA-attention layer whose feed-forward is the MoE of c.family["moe"]
// under "<layer prefix><ffn>.": the whole spec list of a sparse layer.
std::vector<TensorSpec> llama_moe_layer_specs(const ModelConfig& c, int64_t layer, const std::string& ffn,
                                              const MoeNames& names);

// Qwen-style sparse layers: every decoder_sparse_step-th layer except those
// in mlp_only_layers (both read from config.json into c.family).
void parse_sparse_layers(const nlohmann::json& hf_config, ModelConfig& c);
bool is_sparse_layer(const ModelConfig& c, int64_t layer);

}  // namespace rinfer

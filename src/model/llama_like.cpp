#include "model/llama_like.h"

#include "model/llama_config.h"

namespace rinfer {

ModelConfig LlamaLikeArchitecture::parse_hf_config(const nlohmann::json& j) const {
  ModelConfig c;
  c.architecture = name_;
  parse_llama_common(j, c);
  configure(j, c);
  c.validate();
  return c;
}

std::vector<TensorSpec> LlamaLikeArchitecture::tensor_specs(const ModelConfig& c, int64_t group) const {
  if (group == kGlobalGroup) return llama_global_specs(c);
  if (sparse_layer(c, group)) return llama_moe_layer_specs(c, group, moe_block(), moe_names(c));
  return llama_tensor_specs(c, group);
}

bool LlamaLikeArchitecture::ignored_hf_tensor(const ModelConfig& c, const std::string& name) const {
  return name.find("rotary_emb.inv_freq") != std::string::npos || Architecture::ignored_hf_tensor(c, name);
}

std::unique_ptr<Model> LlamaLikeArchitecture::create(const ModelConfig& c, const WeightStore& w,
                                                     const Shard& shard) const {
  MoeConfig moe;
  if (c.family.contains("moe")) moe = moe_config(c);
  return make_llama_decoder(c, w, shard, [&](int64_t l) -> std::unique_ptr<FeedForwardBlock> {
    const std::string p = layer_prefix(l);
    if (sparse_layer(c, l)) return make_moe(w, p + moe_block() + ".", moe.routing, moe.shape, moe_names(c), shard, l);
    return std::make_unique<GatedMLP>(GatedMLP::load(w, p + "mlp.", c.hidden_size, c.intermediate_size, "gate_proj",
                                                     "up_proj", "down_proj", c.mlp_bias, shard));
  });
}

}  // namespace rinfer

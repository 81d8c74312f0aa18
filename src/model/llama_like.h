#pragma once
// LlamaLikeArchitecture: the base of the families that are the LLaMA decoder
// under HF's LLaMA tensor names, differing only in config keys and in which
// layers' feed-forward is a mixture of experts (LLaMA, Mistral, Qwen2,
// Mixtral, Qwen2-MoE, DeepSeek-MoE). A family says what differs; the specs,
// the ignored tensors and the decoder are built here.
#include <string>

#include "model/llama_layout.h"
#include "model/moe_layout.h"

namespace rinfer {

class LlamaLikeArchitecture : public Architecture {
 public:
  explicit LlamaLikeArchitecture(std::string hf_name) : name_(std::move(hf_name)) {}

  // parse_llama_common, then the family's own keys (configure), then validate.
  ModelConfig parse_hf_config(const nlohmann::json& j) const final;
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const final;
  // Stored rotary caches (rotary_emb.inv_freq) and what every family drops.
  bool ignored_hf_tensor(const ModelConfig& c, const std::string& name) const final;
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, const Shard& shard) const final;

 protected:
  // The family's config keys on top of the common ones (biases, MoE routing, ...).
  virtual void configure(const nlohmann::json& j, ModelConfig& c) const {}
  // Whether layer l's feed-forward is the MoE of c.family["moe"] (under
  // "<layer prefix><moe_block()>."), and the MoE's tensor names.
  virtual bool sparse_layer(const ModelConfig& c, int64_t l) const { return false; }
  virtual const char* moe_block() const { return "mlp"; }
  virtual MoeNames moe_names(const ModelConfig& c) const { return {}; }

 private:
  std::string name_;
};

}  // namespace rinfer

// Qwen1.5-MoE / Qwen2-MoE (Qwen2MoeForCausalLM): Qwen2 attention (q/k/v
// biases); sparse layers route softmax top-k (renormalized only when
// norm_topk_prob) and add a shared expert scaled by sigmoid(shared_expert_gate(x)).
// Layers listed in mlp_only_layers, or off the decoder_sparse_step, are dense.
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"
#include "model/moe_layout.h"

namespace rinfer {
namespace {

const MoeNames kNames{"gate", "gate_proj", "up_proj", "down_proj", "shared_expert", "shared_expert_gate", ""};

class Qwen2MoeArchitecture : public Architecture {
 public:
  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = "Qwen2MoeForCausalLM";
    parse_llama_common(j, c);
    c.qkv_bias = true;
    RINFER_CHECK(!hf::get_bool(j, "use_sliding_window", false), "config.json: use_sliding_window=true is not supported");
    MoeRouting r;
    r.n_experts = hf::get_int(j, "num_experts");
    r.top_k = hf::get_int(j, "num_experts_per_tok");
    r.norm_topk_prob = hf::get_bool(j, "norm_topk_prob", false);
    MoeShape s{c.hidden_size, hf::get_int(j, "moe_intermediate_size"), hf::get_int(j, "shared_expert_intermediate_size")};
    c.family["moe"] = moe_to_json(r, s);
    parse_sparse_layers(j, c);
    c.validate();
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    if (group == kGlobalGroup) return llama_global_specs(c);
    if (!is_sparse_layer(c, group)) return llama_tensor_specs(c, group);
    return llama_moe_layer_specs(c, group, "mlp", kNames);
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, ThreadPool& pool) const override {
    const MoeConfig moe = moe_config(c);
    const MoeRouting& r = moe.routing;
    const MoeShape& s = moe.shape;
    return make_llama_decoder(c, w, pool, [&](int64_t l) -> std::unique_ptr<FeedForwardBlock> {
      if (is_sparse_layer(c, l)) return make_moe(w, layer_prefix(l) + "mlp.", r, s, kNames);
      return std::make_unique<GatedMLP>(GatedMLP::load(w, layer_prefix(l) + "mlp.", c.hidden_size, c.intermediate_size));
    });
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(qwen2_moe, "Qwen2MoeForCausalLM", Qwen2MoeArchitecture);

}  // namespace rinfer

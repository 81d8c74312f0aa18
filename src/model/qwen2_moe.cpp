// Qwen1.5-MoE / Qwen2-MoE (Qwen2MoeForCausalLM): Qwen2 attention (q/k/v
// biases); sparse layers route softmax top-k (renormalized only when
// norm_topk_prob) and add a shared expert scaled by sigmoid(shared_expert_gate(x)).
// Layers listed in mlp_only_layers, or off the decoder_sparse_step, are dense.
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_like.h"

namespace rinfer {
namespace {

const MoeNames kNames{"gate", "gate_proj", "up_proj", "down_proj", "shared_expert", "shared_expert_gate", ""};

class Qwen2MoeArchitecture : public LlamaLikeArchitecture {
 public:
  Qwen2MoeArchitecture() : LlamaLikeArchitecture("Qwen2MoeForCausalLM") {}

 protected:
  void configure(const nlohmann::json& j, ModelConfig& c) const override {
    c.qkv_bias = true;
    RINFER_CHECK(!hf::get_bool(j, "use_sliding_window", false), "config.json: use_sliding_window=true is not supported");
    MoeRouting r;
    r.n_experts = hf::get_int(j, "num_experts");
    r.top_k = hf::get_int(j, "num_experts_per_tok");
    r.norm_topk_prob = hf::get_bool(j, "norm_topk_prob", false);
    MoeShape s{c.hidden_size, hf::get_int(j, "moe_intermediate_size"), hf::get_int(j, "shared_expert_intermediate_size")};
    c.family["moe"] = moe_to_json(r, s);
    parse_sparse_layers(j, c);
  }
  bool sparse_layer(const ModelConfig& c, int64_t l) const override { return is_sparse_layer(c, l); }
  MoeNames moe_names(const ModelConfig&) const override { return kNames; }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(qwen2_moe, "Qwen2MoeForCausalLM", Qwen2MoeArchitecture);

}  // namespace rinfer

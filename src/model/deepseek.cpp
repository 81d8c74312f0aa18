// DeepSeek-MoE (DeepseekForCausalLM, e.g. deepseek-moe-16b): LLaMA
// attention; the first first_k_dense_replace layers (and those off
// moe_layer_freq) are dense, the rest route softmax top-k (renormalized only
// with norm_topk_prob) plus n_shared_experts always-on experts, which HF
// stores as one MLP of width n_shared_experts * moe_intermediate_size.
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_like.h"

namespace rinfer {
namespace {

MoeNames names(bool shared) { return MoeNames{"gate", "gate_proj", "up_proj", "down_proj", shared ? "shared_experts" : "", "", ""}; }

bool is_moe_layer(const ModelConfig& c, int64_t l) {
  return l >= c.family.at("first_k_dense_replace").get<int64_t>() && l % c.family.at("moe_layer_freq").get<int64_t>() == 0;
}

class DeepseekArchitecture : public LlamaLikeArchitecture {
 public:
  DeepseekArchitecture() : LlamaLikeArchitecture("DeepseekForCausalLM") {}

 protected:
  void configure(const nlohmann::json& j, ModelConfig& c) const override {
    c.qkv_bias = c.o_bias = hf::get_bool(j, "attention_bias", false);
    auto sf = j.find("scoring_func");
    RINFER_CHECK(sf == j.end() || sf->is_null() || *sf == "softmax", "config.json: scoring_func ", sf->dump(),
                 " is not supported for DeepseekForCausalLM (softmax only)");
    MoeRouting r;
    r.n_experts = hf::get_int(j, "n_routed_experts");
    r.top_k = hf::get_int(j, "num_experts_per_tok");
    r.norm_topk_prob = hf::get_bool(j, "norm_topk_prob", false);
    const int64_t n_shared = hf::get_int(j, "n_shared_experts", 0);
    const int64_t inter = hf::get_int(j, "moe_intermediate_size");
    c.family["moe"] = moe_to_json(r, MoeShape{c.hidden_size, inter, n_shared * inter});
    c.family["first_k_dense_replace"] = hf::get_int(j, "first_k_dense_replace", 0);
    c.family["moe_layer_freq"] = hf::get_int(j, "moe_layer_freq", 1);
    RINFER_CHECK(c.family["moe_layer_freq"].get<int64_t>() >= 1, "config.json: moe_layer_freq must be >= 1");
  }
  bool sparse_layer(const ModelConfig& c, int64_t l) const override { return is_moe_layer(c, l); }
  MoeNames moe_names(const ModelConfig& c) const override { return names(moe_config(c).shape.shared_inter > 0); }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(deepseek, "DeepseekForCausalLM", DeepseekArchitecture);

}  // namespace rinfer

// DeepSeek-MoE (DeepseekForCausalLM, e.g. deepseek-moe-16b): LLaMA
// attention; the first first_k_dense_replace layers (and those off
// moe_layer_freq) are dense, the rest route softmax top-k (renormalized only
// with norm_topk_prob) plus n_shared_experts always-on experts, which HF
// stores as one MLP of width n_shared_experts * moe_intermediate_size.
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"
#include "model/moe_layout.h"

namespace rinfer {
namespace {

MoeNames names(bool shared) { return MoeNames{"gate", "gate_proj", "up_proj", "down_proj", shared ? "shared_experts" : "", "", ""}; }

bool is_moe_layer(const ModelConfig& c, int64_t l) {
  return l >= c.family.at("first_k_dense_replace").get<int64_t>() && l % c.family.at("moe_layer_freq").get<int64_t>() == 0;
}

class DeepseekArchitecture : public Architecture {
 public:
  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = "DeepseekForCausalLM";
    parse_llama_common(j, c);
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
    MoeShape s{c.hidden_size, inter, n_shared * inter};
    c.family["moe"] = moe_to_json(r, s);
    c.family["first_k_dense_replace"] = hf::get_int(j, "first_k_dense_replace", 0);
    c.family["moe_layer_freq"] = hf::get_int(j, "moe_layer_freq", 1);
    RINFER_CHECK(c.family["moe_layer_freq"].get<int64_t>() >= 1, "config.json: moe_layer_freq must be >= 1");
    c.validate();
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    if (group == kGlobalGroup) return llama_global_specs(c);
    if (!is_moe_layer(c, group)) return llama_tensor_specs(c, group);
    return llama_moe_layer_specs(c, group, "mlp", names(moe_config(c).shape.shared_inter > 0));
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, ThreadPool& pool) const override {
    const MoeConfig moe = moe_config(c);
    const MoeRouting& r = moe.routing;
    const MoeShape& s = moe.shape;
    return make_llama_decoder(c, w, pool, [&](int64_t l) -> std::unique_ptr<FeedForwardBlock> {
      if (is_moe_layer(c, l)) return make_moe(w, layer_prefix(l) + "mlp.", r, s, names(s.shared_inter > 0));
      return std::make_unique<GatedMLP>(GatedMLP::load(w, layer_prefix(l) + "mlp.", c.hidden_size, c.intermediate_size));
    });
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(deepseek, "DeepseekForCausalLM", DeepseekArchitecture);

}  // namespace rinfer

// Mixtral (MixtralForCausalLM): LLaMA attention, every layer a sparse MoE of
// SwiGLU experts (w1 = gate, w3 = up, w2 = down); router softmax over all
// experts, top-k, the chosen weights renormalized to sum 1.
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"
#include "model/moe_layout.h"

namespace rinfer {
namespace {

const MoeNames kNames{"gate", "w1", "w3", "w2", "", "", ""};

class MixtralArchitecture : public Architecture {
 public:
  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = "MixtralForCausalLM";
    parse_llama_common(j, c);
    int64_t window = hf::get_int(j, "sliding_window", 0);
    if (window > 0 && window < c.max_position_embeddings) c.max_position_embeddings = window;
    MoeRouting r;
    r.n_experts = hf::get_int(j, "num_local_experts");
    r.top_k = hf::get_int(j, "num_experts_per_tok");
    r.norm_topk_prob = true;
    MoeShape s{c.hidden_size, c.intermediate_size, 0};
    c.family["moe"] = moe_to_json(r, s);
    c.validate();
    RINFER_CHECK(r.top_k >= 1 && r.top_k <= r.n_experts, "config.json: num_experts_per_tok must be in [1, num_local_experts]");
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    if (group == kGlobalGroup) return llama_global_specs(c);
    return llama_moe_layer_specs(c, group, "block_sparse_moe", kNames);
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, ThreadPool& pool) const override {
    const MoeConfig moe = moe_config(c);
    const MoeRouting& r = moe.routing;
    const MoeShape& s = moe.shape;
    return make_llama_decoder(c, w, pool, [&](int64_t l) {
      return make_moe(w, layer_prefix(l) + "block_sparse_moe.", r, s, kNames);
    });
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(mixtral, "MixtralForCausalLM", MixtralArchitecture);

}  // namespace rinfer

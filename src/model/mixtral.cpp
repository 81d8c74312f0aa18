// Mixtral (MixtralForCausalLM): LLaMA attention, every layer a sparse MoE of
// SwiGLU experts (w1 = gate, w3 = up, w2 = down); router softmax over all
// experts, top-k, the chosen weights renormalized to sum 1.
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_like.h"

namespace rinfer {
namespace {

const MoeNames kNames{"gate", "w1", "w3", "w2", "", "", ""};

class MixtralArchitecture : public LlamaLikeArchitecture {
 public:
  MixtralArchitecture() : LlamaLikeArchitecture("MixtralForCausalLM") {}

 protected:
  void configure(const nlohmann::json& j, ModelConfig& c) const override {
    int64_t window = hf::get_int(j, "sliding_window", 0);
    if (window > 0 && window < c.max_position_embeddings) c.max_position_embeddings = window;
    MoeRouting r;
    r.n_experts = hf::get_int(j, "num_local_experts");
    r.top_k = hf::get_int(j, "num_experts_per_tok");
    r.norm_topk_prob = true;
    RINFER_CHECK(r.top_k >= 1 && r.top_k <= r.n_experts, "config.json: num_experts_per_tok must be in [1, num_local_experts]");
    c.family["moe"] = moe_to_json(r, MoeShape{c.hidden_size, c.intermediate_size, 0});
  }
  bool sparse_layer(const ModelConfig&, int64_t) const override { return true; }
  const char* moe_block() const override { return "block_sparse_moe"; }
  MoeNames moe_names(const ModelConfig&) const override { return kNames; }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(mixtral, "MixtralForCausalLM", MixtralArchitecture);

}  // namespace rinfer

// Qwen3 (Qwen3ForCausalLM) and Qwen3-MoE (Qwen3MoeForCausalLM): the LLaMA
// layout without q/k/v biases, an explicit head_dim, and an RMSNorm over each
// query and key head (self_attn.q_norm / k_norm, weights [head_dim]) applied
// before RoPE. Qwen3-MoE routes softmax top-k (renormalized when
// norm_topk_prob, as its configs set) with no shared expert; layers in
// mlp_only_layers or off decoder_sparse_step are dense.
// The shared reference set has no Qwen3 checkpoint: tiny Qwen3 / Qwen3-MoE
// checkpoints are checked against tests/reference/hf_forward.py, a float64
// forward pass written from the HF modeling code that itself reproduces the
// golden logits of five other families (tests/model/test_reference_families.cpp).
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"
#include "model/moe_layout.h"

namespace rinfer {
namespace {

const MoeNames kMoeNames{"gate", "gate_proj", "up_proj", "down_proj", "", "", ""};

class Qwen3Architecture : public Architecture {
 public:
  explicit Qwen3Architecture(bool moe) : moe_(moe) {}

  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = moe_ ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM";
    parse_llama_common(j, c);
    c.qkv_bias = c.o_bias = hf::get_bool(j, "attention_bias", false);
    RINFER_CHECK(!hf::get_bool(j, "use_sliding_window", false), "config.json: use_sliding_window=true is not supported");
    if (moe_) {
      MoeRouting r;
      r.n_experts = hf::get_int(j, "num_experts");
      r.top_k = hf::get_int(j, "num_experts_per_tok");
      r.norm_topk_prob = hf::get_bool(j, "norm_topk_prob", true);
      MoeShape s{c.hidden_size, hf::get_int(j, "moe_intermediate_size"), 0};
      c.family["moe"] = moe_to_json(r, s);
      parse_sparse_layers(j, c);
    }
    c.validate();
    return c;
  }

  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    if (group == kGlobalGroup) return llama_global_specs(c);
    auto s = llama_attention_specs(c, group);
    const std::string p = layer_prefix(group);
    s.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, TensorRole::Vector});
    s.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, TensorRole::Vector});
    std::vector<TensorSpec> ffn;
    if (sparse(c, group)) {
      const MoeConfig moe = moe_config(c);
      const MoeRouting& r = moe.routing;
      const MoeShape& ms = moe.shape;
      ffn = moe_specs(p + "mlp.", r, ms, kMoeNames);
    } else {
      ffn = gated_mlp_specs(p + "mlp.", c.hidden_size, c.intermediate_size);
    }
    s.insert(s.end(), ffn.begin(), ffn.end());
    return s;
  }

  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, const Shard& shard) const override {
    auto rope = std::make_shared<const RotaryEmbedding>(c, c.head_dim, RopeStyle::RotateHalf);
    MoeConfig moe;
    if (moe_) moe = moe_config(c);
    const MoeRouting& r = moe.routing;
    const MoeShape& ms = moe.shape;
    return make_llama_decoder(
        c, w, shard,
        [&](int64_t l) -> std::unique_ptr<FeedForwardBlock> {
          if (sparse(c, l)) return make_moe(w, layer_prefix(l) + "mlp.", r, ms, kMoeNames, shard, l);
          return std::make_unique<GatedMLP>(GatedMLP::load(w, layer_prefix(l) + "mlp.", c.hidden_size,
                                                           c.intermediate_size, "gate_proj", "up_proj", "down_proj",
                                                           false, shard));
        },
        [&](int64_t l) -> std::unique_ptr<AttentionBlock> {
          auto attn = make_llama_attention(c, w, shard, l, rope);
          const std::string p = layer_prefix(l) + "self_attn.";
          static_cast<GqaAttention*>(attn.get())
              ->set_qk_norm(RMSNorm::load(w, p + "q_norm.weight", c.head_dim, c.rms_norm_eps),
                            RMSNorm::load(w, p + "k_norm.weight", c.head_dim, c.rms_norm_eps));
          return attn;
        });
  }

 private:
  bool sparse(const ModelConfig& c, int64_t layer) const { return moe_ && is_sparse_layer(c, layer); }
  bool moe_;
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(qwen3, "Qwen3ForCausalLM", Qwen3Architecture, false);
RINFER_REGISTER_ARCHITECTURE(qwen3_moe, "Qwen3MoeForCausalLM", Qwen3Architecture, true);

}  // namespace rinfer

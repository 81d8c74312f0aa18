// DeepSeek-V2 / V2-Lite (DeepseekV2ForCausalLM) and DeepSeek-V3 / R1
// (DeepseekV3ForCausalLM): multi-head latent attention (mla.h) with DeepSeek
// YaRN, and MoE feed-forward after the first first_k_dense_replace layers.
// Routing:
//  * V2: softmax scores; "greedy" top-k or "group_limited_greedy" (groups
//    ranked by their best expert); routed_scaling_factor multiplies the
//    weights only when they are not renormalized (norm_topk_prob false);
//  * V3: sigmoid scores; experts chosen by score + e_score_correction_bias
//    within the topk_group best groups (ranked by their two best biased
//    scores); weights are the unbiased scores, renormalized when
//    norm_topk_prob, then times routed_scaling_factor.
// The V3 multi-token-prediction layers (model.layers.<n_layers>.*) are not
// part of the forward pass and are dropped.
#include <cmath>

#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"
#include "model/mla.h"
#include "model/moe_layout.h"

namespace rinfer {
namespace {

MlaShape mla_shape(const ModelConfig& c) {
  const auto& f = c.family;
  return MlaShape{c.hidden_size,
                  c.n_heads,
                  f.at("q_lora_rank").get<int64_t>(),
                  f.at("kv_lora_rank").get<int64_t>(),
                  f.at("qk_nope_head_dim").get<int64_t>(),
                  f.at("qk_rope_head_dim").get<int64_t>(),
                  f.at("v_head_dim").get<int64_t>()};
}

bool is_moe_layer(const ModelConfig& c, int64_t l) {
  return c.family.at("moe").at("n_experts").get<int64_t>() > 0 &&
         l >= c.family.at("first_k_dense_replace").get<int64_t>() &&
         l % c.family.at("moe_layer_freq").get<int64_t>() == 0;
}

class DeepseekV2Architecture : public Architecture {
 public:
  explicit DeepseekV2Architecture(bool v3) : v3_(v3) {}

  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = v3_ ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM";
    nlohmann::json base = j;
    base.erase("rope_scaling");  // DeepSeek's YaRN is parsed below
    base.erase("head_dim");
    parse_llama_common(base, c);
    auto& f = c.family;
    f["q_lora_rank"] = hf::get_int(j, "q_lora_rank", 0);
    f["kv_lora_rank"] = hf::get_int(j, "kv_lora_rank");
    f["qk_nope_head_dim"] = hf::get_int(j, "qk_nope_head_dim");
    f["qk_rope_head_dim"] = hf::get_int(j, "qk_rope_head_dim");
    f["v_head_dim"] = hf::get_int(j, "v_head_dim");
    c.head_dim = f["qk_nope_head_dim"].get<int64_t>() + f["qk_rope_head_dim"].get<int64_t>();
    c.n_kv_heads = c.n_heads;  // MLA: every head reads the one shared latent
    RINFER_CHECK(f["qk_rope_head_dim"].get<int64_t>() % 2 == 0, "config.json: qk_rope_head_dim must be even");
    auto rs = j.find("rope_scaling");
    if (rs != j.end() && !rs->is_null()) {
      RINFER_CHECK(rs->is_object(), "config.json: rope_scaling must be an object or null");
      std::string type = rs->value("type", rs->value("rope_type", ""));
      RINFER_CHECK(type == "yarn", "config.json: rope_scaling type \"", type, "\" is not supported for ",
                   c.architecture, " (supported: yarn)");
      auto& y = c.rope_scaling;
      y.type = "yarn";
      y.factor = hf::get_double(*rs, "factor", 1.0);
      y.original_max_position = hf::get_int(*rs, "original_max_position_embeddings", 4096);
      y.beta_fast = hf::get_double(*rs, "beta_fast", 32.0);
      y.beta_slow = hf::get_double(*rs, "beta_slow", 1.0);
      y.mscale = hf::get_double(*rs, "mscale", 1.0);
      y.mscale_all_dim = hf::get_double(*rs, "mscale_all_dim", 0.0);
    }
    MoeRouting r;
    r.n_experts = hf::get_int(j, "n_routed_experts", 0);
    r.top_k = hf::get_int(j, "num_experts_per_tok", 1);
    r.norm_topk_prob = hf::get_bool(j, "norm_topk_prob", false);
    r.routed_scaling = float(hf::get_double(j, "routed_scaling_factor", 1.0));
    const std::string scoring = j.value("scoring_func", "softmax");
    const std::string method = j.value("topk_method", v3_ ? "noaux_tc" : "greedy");
    if (v3_) {
      RINFER_CHECK(scoring == "sigmoid", "config.json: scoring_func \"", scoring, "\" is not supported for V3");
      RINFER_CHECK(method == "noaux_tc", "config.json: topk_method \"", method, "\" is not supported for V3");
      r.sigmoid = true;
      r.group_score_top2_sum = true;
    } else {
      RINFER_CHECK(scoring == "softmax", "config.json: scoring_func \"", scoring, "\" is not supported for V2");
      RINFER_CHECK(method == "greedy" || method == "group_limited_greedy", "config.json: topk_method \"", method,
                   "\" is not supported for V2 (greedy, group_limited_greedy)");
      r.scale_only_unnormalized = true;
    }
    if (method != "greedy") {
      r.n_group = hf::get_int(j, "n_group", 1);
      r.topk_group = hf::get_int(j, "topk_group", 1);
    }
    const int64_t inter = hf::get_int(j, "moe_intermediate_size", 0);
    MoeShape s{c.hidden_size, inter, hf::get_int(j, "n_shared_experts", 0) * inter};
    f["moe"] = moe_to_json(r, s);
    f["first_k_dense_replace"] = hf::get_int(j, "first_k_dense_replace", 0);
    f["moe_layer_freq"] = hf::get_int(j, "moe_layer_freq", 1);
    RINFER_CHECK(f["moe_layer_freq"].get<int64_t>() >= 1, "config.json: moe_layer_freq must be >= 1");
    c.validate();
    return c;
  }

  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    if (group == kGlobalGroup) return llama_global_specs(c);
    const MlaShape m = mla_shape(c);
    const int64_t H = c.hidden_size, QK = m.nope_dim + m.rope_dim;
    const std::string p = layer_prefix(group), a = p + "self_attn.";
    std::vector<TensorSpec> s;
    s.push_back({p + "input_layernorm.weight", {H}, TensorRole::Vector});
    if (m.q_lora_rank > 0) {
      s.push_back({a + "q_a_proj.weight", {m.q_lora_rank, H}, TensorRole::Matrix});
      s.push_back({a + "q_a_layernorm.weight", {m.q_lora_rank}, TensorRole::Vector});
      s.push_back({a + "q_b_proj.weight", {m.n_heads * QK, m.q_lora_rank}, TensorRole::Matrix});
    } else {
      s.push_back({a + "q_proj.weight", {m.n_heads * QK, H}, TensorRole::Matrix});
    }
    s.push_back({a + "kv_a_proj_with_mqa.weight", {m.kv_lora_rank + m.rope_dim, H}, TensorRole::Matrix});
    s.push_back({a + "kv_a_layernorm.weight", {m.kv_lora_rank}, TensorRole::Vector});
    s.push_back({a + "kv_b_proj.weight", {m.n_heads * (m.nope_dim + m.v_dim), m.kv_lora_rank}, TensorRole::Matrix});
    s.push_back({a + "o_proj.weight", {H, m.n_heads * m.v_dim}, TensorRole::Matrix});
    s.push_back({p + "post_attention_layernorm.weight", {H}, TensorRole::Vector});
    std::vector<TensorSpec> ffn;
    if (is_moe_layer(c, group)) {
      const MoeConfig moe = moe_config(c);
      const MoeRouting& r = moe.routing;
      const MoeShape& ms = moe.shape;
      ffn = moe_specs(p + "mlp.", r, ms, names(ms.shared_inter > 0));
    } else {
      ffn = gated_mlp_specs(p + "mlp.", H, c.intermediate_size);
    }
    s.insert(s.end(), ffn.begin(), ffn.end());
    return s;
  }

  bool ignored_hf_tensor(const ModelConfig& c, const std::string& name) const override {
    // model.layers.<n_layers + i>.*: the multi-token-prediction module.
    if (Architecture::ignored_hf_tensor(c, name)) return true;
    const std::string lp = "model.layers.";
    if (name.compare(0, lp.size(), lp) != 0) return false;
    return std::atoll(name.c_str() + lp.size()) >= c.n_layers;
  }

  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, const Shard& shard) const override {
    const MlaShape m = mla_shape(c);
    auto rope = std::make_shared<const RotaryEmbedding>(c, m.rope_dim, RopeStyle::Interleaved);
    float scale = float(1.0 / std::sqrt(double(m.nope_dim + m.rope_dim)));
    if (c.rope_scaling.type == "yarn" && c.rope_scaling.mscale_all_dim != 0) {
      const double ms = yarn_get_mscale(c.rope_scaling.factor, c.rope_scaling.mscale_all_dim);
      scale = float(scale * ms * ms);
    }
    const MoeConfig moe = moe_config(c);
    const MoeRouting& r = moe.routing;
    const MoeShape& ms = moe.shape;
    return make_llama_decoder(
        c, w, shard,
        [&](int64_t l) -> std::unique_ptr<FeedForwardBlock> {
          if (is_moe_layer(c, l))
            return make_moe(w, layer_prefix(l) + "mlp.", r, ms, names(ms.shared_inter > 0), shard, l);
          return std::make_unique<GatedMLP>(GatedMLP::load(w, layer_prefix(l) + "mlp.", c.hidden_size,
                                                           c.intermediate_size, "gate_proj", "up_proj", "down_proj",
                                                           false, shard));
        },
        [&](int64_t l) {
          return std::make_unique<MlaAttention>(m, w, layer_prefix(l) + "self_attn.", c.rms_norm_eps, rope, scale,
                                                shard);
        },
        // One latent row per token, not per head: every rank caches all of it.
        KVCacheShape{c.n_layers, 1, m.kv_lora_rank + m.rope_dim, 0});
  }

 private:
  MoeNames names(bool shared) const {
    MoeNames n{"gate", "gate_proj", "up_proj", "down_proj", shared ? "shared_experts" : "", "", ""};
    if (v3_) n.correction_bias = "gate.e_score_correction_bias";
    return n;
  }
  bool v3_;
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(deepseek_v2, "DeepseekV2ForCausalLM", DeepseekV2Architecture, false);
RINFER_REGISTER_ARCHITECTURE(deepseek_v3, "DeepseekV3ForCausalLM", DeepseekV2Architecture, true);

}  // namespace rinfer

// Qwen (first generation, QWenLMHeadModel, remote code): transformer.* names,
// fused c_attn [q; k; v] with bias, no other biases, and an MLP written as
// c_proj(w1(x) * silu(w2(x))) whose config intermediate_size is twice the
// real width. The converter splits c_attn and maps w2 -> gate, w1 -> up,
// c_proj -> down, so at run time it is the Qwen2 decoder.
// use_dynamic_ntk / use_logn_attn only act beyond seq_length, so rinfer caps
// the context at seq_length instead of implementing them.
#include "core/error.h"
#include "io/safetensors.h"
#include "model/fused_source.h"
#include "model/llama_layout.h"

namespace rinfer {
namespace {

class QwenArchitecture : public Architecture {
 public:
  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = "QWenLMHeadModel";
    c.vocab_size = hf::get_int(j, "vocab_size");
    c.hidden_size = hf::get_int(j, "hidden_size");
    c.intermediate_size = hf::get_int(j, "intermediate_size") / 2;
    c.n_layers = hf::get_int(j, "num_hidden_layers");
    c.n_heads = hf::get_int(j, "num_attention_heads");
    RINFER_CHECK(c.n_heads > 0, "config.json: num_attention_heads must be positive");
    c.n_kv_heads = c.n_heads;
    c.head_dim = hf::get_int(j, "kv_channels", c.hidden_size / c.n_heads);
    RINFER_CHECK(c.head_dim * c.n_heads == c.hidden_size, "config.json: kv_channels * num_attention_heads must equal hidden_size");
    c.rms_norm_eps = hf::get_double(j, "layer_norm_epsilon", 1e-6);
    c.rope_theta = hf::get_double(j, "rotary_emb_base", 10000.0);
    RINFER_CHECK(hf::get_double(j, "rotary_pct", 1.0) == 1.0, "config.json: rotary_pct != 1 is not supported");
    c.max_position_embeddings = hf::get_int(j, "seq_length", 2048);
    c.qkv_bias = true;
    c.tie_word_embeddings = false;
    auto bos = hf::get_id_list(j, "bos_token_id");
    c.bos_token_id = bos.empty() ? -1 : bos[0];
    c.eos_token_ids = hf::get_id_list(j, "eos_token_id");
    c.validate();
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    return llama_tensor_specs(c, group);
  }
  std::vector<TensorSpec> hf_tensor_specs(const ModelConfig& c, int64_t group) const override {
    return hf_specs_from_sources(llama_tensor_specs(c, group), [&](const std::string& n) { return source(c, n); });
  }
  void read_hf_rows(const ModelConfig& c, const TensorSpec& spec, const io::SafetensorsCheckpoint& hf, int64_t row0,
                    int64_t row1, float* dst) const override {
    read_rows_from(c, hf, spec, source(c, spec.name), row0, row1, dst);
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, const Shard& shard) const override {
    return make_llama_decoder(c, w, shard);
  }

 private:
  HfSource source(const ModelConfig& c, const std::string& name) const {
    const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    if (name == "model.embed_tokens.weight") return {"transformer.wte.weight", {V, H}, 0};
    if (name == "model.norm.weight") return {"transformer.ln_f.weight", {H}, 0};
    if (name == "lm_head.weight") return {"lm_head.weight", {V, H}, 0};
    const std::string lp = "model.layers.";
    RINFER_ASSERT(name.compare(0, lp.size(), lp) == 0);
    const size_t dot = name.find('.', lp.size());
    const std::string rest = name.substr(dot + 1);
    const std::string p = "transformer.h." + name.substr(lp.size(), dot - lp.size()) + ".";
    if (rest == "input_layernorm.weight") return {p + "ln_1.weight", {H}, 0};
    if (rest == "post_attention_layernorm.weight") return {p + "ln_2.weight", {H}, 0};
    if (rest == "self_attn.q_proj.weight") return {p + "attn.c_attn.weight", {3 * H, H}, 0};
    if (rest == "self_attn.k_proj.weight") return {p + "attn.c_attn.weight", {3 * H, H}, H};
    if (rest == "self_attn.v_proj.weight") return {p + "attn.c_attn.weight", {3 * H, H}, 2 * H};
    if (rest == "self_attn.q_proj.bias") return {p + "attn.c_attn.bias", {3 * H}, 0};
    if (rest == "self_attn.k_proj.bias") return {p + "attn.c_attn.bias", {3 * H}, H};
    if (rest == "self_attn.v_proj.bias") return {p + "attn.c_attn.bias", {3 * H}, 2 * H};
    if (rest == "self_attn.o_proj.weight") return {p + "attn.c_proj.weight", {H, H}, 0};
    if (rest == "mlp.gate_proj.weight") return {p + "mlp.w2.weight", {I, H}, 0};
    if (rest == "mlp.up_proj.weight") return {p + "mlp.w1.weight", {I, H}, 0};
    if (rest == "mlp.down_proj.weight") return {p + "mlp.c_proj.weight", {H, I}, 0};
    fail("internal error: no Qwen source for ", name);
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(qwen1, "QWenLMHeadModel", QwenArchitecture);

}  // namespace rinfer

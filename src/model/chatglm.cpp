// ChatGLM2/3 and GLM-4 (ChatGLMModel / ChatGLMForConditionalGeneration),
// remote-code layout under transformer.*:
//  * query_key_value: fused [q (n_heads); k (groups); v (groups)] x kv_channels, with bias;
//  * multi-query groups (multi_query_group_num) = GQA;
//  * RoPE on the first half of each head only, adjacent pairs (2i, 2i+1),
//    base 10000 * rope_ratio (the stored rotary_pos_emb.inv_freq lacks the
//    ratio and is dropped);
//  * dense_h_to_4h: fused [gate; up] of a SwiGLU MLP;
//  * padded_vocab_size rows in the embedding and output layer.
// The converter splits the fused tensors into the LLaMA names, so at run time
// GLM is a Decoder with its own rotary setting.
#include "core/error.h"
#include "io/safetensors.h"
#include "model/fused_source.h"
#include "model/llama_layout.h"

namespace rinfer {
namespace {

class ChatGlmArchitecture : public Architecture {
 public:
  explicit ChatGlmArchitecture(std::string name) : name_(std::move(name)) {}

  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = name_;
    c.hidden_size = hf::get_int(j, "hidden_size");
    c.intermediate_size = hf::get_int(j, "ffn_hidden_size");
    c.n_layers = hf::get_int(j, "num_layers", hf::get_int(j, "num_hidden_layers", 0));
    c.n_heads = hf::get_int(j, "num_attention_heads");
    RINFER_CHECK(c.n_heads > 0, "config.json: num_attention_heads must be positive");
    const bool mqa = hf::get_bool(j, "multi_query_attention", false);
    c.n_kv_heads = mqa ? hf::get_int(j, "multi_query_group_num") : c.n_heads;
    c.head_dim = hf::get_int(j, "kv_channels", c.hidden_size / c.n_heads);
    c.vocab_size = hf::get_int(j, "padded_vocab_size", hf::get_int(j, "vocab_size", 0));
    c.rms_norm_eps = hf::get_double(j, "layernorm_epsilon", 1e-5);
    c.rope_theta = 10000.0 * hf::get_double(j, "rope_ratio", 1.0);
    c.max_position_embeddings = hf::get_int(j, "seq_length", 8192);
    c.qkv_bias = hf::get_bool(j, "add_qkv_bias", true);
    RINFER_CHECK(!hf::get_bool(j, "add_bias_linear", false), "config.json: add_bias_linear=true is not supported");
    RINFER_CHECK(hf::get_bool(j, "rmsnorm", true), "config.json: rmsnorm=false (LayerNorm GLM) is not supported");
    RINFER_CHECK(!hf::get_bool(j, "apply_residual_connection_post_layernorm", false),
                 "config.json: apply_residual_connection_post_layernorm=true is not supported");
    RINFER_CHECK(hf::get_bool(j, "post_layer_norm", true), "config.json: post_layer_norm=false is not supported");
    c.tie_word_embeddings = false;
    auto bos = hf::get_id_list(j, "bos_token_id");
    c.bos_token_id = bos.empty() ? -1 : bos[0];
    c.eos_token_ids = hf::get_id_list(j, "eos_token_id");
    c.family["rotary_dim"] = c.head_dim / 2;
    c.validate();
    RINFER_CHECK(c.head_dim % 4 == 0, "config.json: kv_channels must be a multiple of 4 for GLM's half rotary");
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

  bool ignored_hf_tensor(const ModelConfig&, const std::string& name) const override {
    return name.find("rotary_pos_emb.inv_freq") != std::string::npos;
  }

  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, const Shard& shard) const override {
    auto rope = std::make_shared<const RotaryEmbedding>(c, c.family.at("rotary_dim").get<int64_t>(),
                                                        RopeStyle::Interleaved);
    return make_llama_decoder(c, w, shard, {}, [&](int64_t l) { return make_llama_attention(c, w, shard, l, rope); });
  }

 private:
  // Where each rinfer (LLaMA-named) tensor lives in the GLM checkpoint.
  HfSource source(const ModelConfig& c, const std::string& name) const {
    const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size, V = c.vocab_size;
    const int64_t q_rows = c.n_heads * D, kv_rows = c.n_kv_heads * D, qkv_rows = q_rows + 2 * kv_rows;
    if (name == "model.embed_tokens.weight") return {"transformer.embedding.word_embeddings.weight", {V, H}, 0};
    if (name == "model.norm.weight") return {"transformer.encoder.final_layernorm.weight", {H}, 0};
    if (name == "lm_head.weight") return {"transformer.output_layer.weight", {V, H}, 0};
    const std::string lp = "model.layers.";
    RINFER_ASSERT(name.compare(0, lp.size(), lp) == 0);
    const size_t dot = name.find('.', lp.size());
    const std::string layer = name.substr(lp.size(), dot - lp.size());
    const std::string rest = name.substr(dot + 1);
    const std::string p = "transformer.encoder.layers." + layer + ".";
    const std::string qkv_w = p + "self_attention.query_key_value.weight";
    const std::string qkv_b = p + "self_attention.query_key_value.bias";
    if (rest == "input_layernorm.weight") return {p + "input_layernorm.weight", {H}, 0};
    if (rest == "post_attention_layernorm.weight") return {p + "post_attention_layernorm.weight", {H}, 0};
    if (rest == "self_attn.q_proj.weight") return {qkv_w, {qkv_rows, H}, 0};
    if (rest == "self_attn.k_proj.weight") return {qkv_w, {qkv_rows, H}, q_rows};
    if (rest == "self_attn.v_proj.weight") return {qkv_w, {qkv_rows, H}, q_rows + kv_rows};
    if (rest == "self_attn.q_proj.bias") return {qkv_b, {qkv_rows}, 0};
    if (rest == "self_attn.k_proj.bias") return {qkv_b, {qkv_rows}, q_rows};
    if (rest == "self_attn.v_proj.bias") return {qkv_b, {qkv_rows}, q_rows + kv_rows};
    if (rest == "self_attn.o_proj.weight") return {p + "self_attention.dense.weight", {H, q_rows}, 0};
    if (rest == "mlp.gate_proj.weight") return {p + "mlp.dense_h_to_4h.weight", {2 * I, H}, 0};
    if (rest == "mlp.up_proj.weight") return {p + "mlp.dense_h_to_4h.weight", {2 * I, H}, I};
    if (rest == "mlp.down_proj.weight") return {p + "mlp.dense_4h_to_h.weight", {H, I}, 0};
    fail("internal error: no GLM source for ", name);
  }

  std::string name_;
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(chatglm_model, "ChatGLMModel",
                             ChatGlmArchitecture, "ChatGLMModel");
RINFER_REGISTER_ARCHITECTURE(chatglm_cg, "ChatGLMForConditionalGeneration",
                             ChatGlmArchitecture, "ChatGLMForConditionalGeneration");

}  // namespace rinfer

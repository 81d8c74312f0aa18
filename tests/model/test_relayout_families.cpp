// Families without their own golden folder, checked against the reference
// logits of a family with the same mathematics: the golden checkpoint is
// rewritten, tensor by tensor, into the other family's HF layout (a pure
// re-layout, as the official conversion scripts do), and must reproduce the
// original folder's reference logits.
//  * QWenLMHeadModel (Qwen-1) from golden/qwen2: fused c_attn, w1/w2/c_proj
//    MLP; Qwen-1 has no GQA, so each k/v head is repeated for its query heads.
//  * GlmForCausalLM from golden/chatglm_glm4: LLaMA-style names, fused
//    gate_up_proj, partial_rotary_factor.
#include <map>

#include "io/safetensors.h"
#include "model/golden_check.h"

namespace rinfer {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  Shape shape;
  std::vector<float> data;
};

Tensor load(const io::SafetensorsCheckpoint& ck, const std::string& name) {
  TensorView v = ck.get(name);
  Tensor t{v.shape, std::vector<float>(size_t(v.numel()))};
  convert_to_f32(v.dtype, v.data, t.data.data(), t.data.size());
  return t;
}

// Rows [r0, r1) of a 1-D or 2-D tensor.
Tensor rows(const Tensor& t, int64_t r0, int64_t r1) {
  const int64_t w = t.shape.size() == 2 ? t.shape[1] : 1;
  Tensor o{t.shape, {t.data.begin() + r0 * w, t.data.begin() + r1 * w}};
  o.shape[0] = r1 - r0;
  return o;
}

Tensor concat(const std::vector<Tensor>& parts) {
  Tensor o{parts[0].shape, {}};
  o.shape[0] = 0;
  for (const auto& p : parts) {
    o.data.insert(o.data.end(), p.data.begin(), p.data.end());
    o.shape[0] += p.shape[0];
  }
  return o;
}

void write_checkpoint(const fs::path& dir, const std::map<std::string, Tensor>& tensors, const nlohmann::json& config) {
  fs::create_directories(dir);
  io::SafetensorsWriter w;
  for (const auto& [name, t] : tensors) w.add(name, DType::F32, t.shape, t.data.data());
  w.write((dir / "model.safetensors").string());
  std::ofstream(dir / "config.json") << config.dump(2);
}

TEST(RelayoutFamilies, Qwen1FromQwen2Golden) {
  const fs::path golden = test::testdata("golden/qwen2");
  const auto cfg = test::read_json(golden / "hf" / "config.json");
  io::SafetensorsCheckpoint ck((golden / "hf").string());
  const int64_t H = cfg["hidden_size"], NH = cfg["num_attention_heads"], NKV = cfg["num_key_value_heads"];
  const int64_t D = H / NH, L = cfg["num_hidden_layers"];
  // k/v head g serves query heads g*NH/NKV ...: repeat its rows per query head.
  auto mha = [&](const Tensor& t) {
    std::vector<Tensor> parts;
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = h / (NH / NKV);
      parts.push_back(rows(t, g * D, (g + 1) * D));
    }
    return concat(parts);
  };
  std::map<std::string, Tensor> out;
  out["transformer.wte.weight"] = load(ck, "model.embed_tokens.weight");
  out["lm_head.weight"] = load(ck, "model.embed_tokens.weight");  // golden qwen2 is tied
  out["transformer.ln_f.weight"] = load(ck, "model.norm.weight");
  for (int64_t l = 0; l < L; ++l) {
    const std::string s = "model.layers." + std::to_string(l) + ".", d = "transformer.h." + std::to_string(l) + ".";
    out[d + "ln_1.weight"] = load(ck, s + "input_layernorm.weight");
    out[d + "ln_2.weight"] = load(ck, s + "post_attention_layernorm.weight");
    for (const char* kind : {"weight", "bias"})
      out[d + "attn.c_attn." + kind] =
          concat({load(ck, s + "self_attn.q_proj." + kind), mha(load(ck, s + "self_attn.k_proj." + kind)),
                  mha(load(ck, s + "self_attn.v_proj." + kind))});
    out[d + "attn.c_proj.weight"] = load(ck, s + "self_attn.o_proj.weight");
    out[d + "mlp.w2.weight"] = load(ck, s + "mlp.gate_proj.weight");  // silu(w2 x) * w1 x
    out[d + "mlp.w1.weight"] = load(ck, s + "mlp.up_proj.weight");
    out[d + "mlp.c_proj.weight"] = load(ck, s + "mlp.down_proj.weight");
  }
  nlohmann::json qcfg = {{"architectures", {"QWenLMHeadModel"}},
                         {"hidden_size", H},
                         {"num_attention_heads", NH},
                         {"num_hidden_layers", L},
                         {"intermediate_size", 2 * cfg["intermediate_size"].get<int64_t>()},
                         {"vocab_size", cfg["vocab_size"]},
                         {"kv_channels", D},
                         {"layer_norm_epsilon", cfg["rms_norm_eps"]},
                         {"rotary_emb_base", cfg["rope_theta"]},
                         {"rotary_pct", 1.0},
                         {"seq_length", 2048},
                         {"use_dynamic_ntk", true},
                         {"use_logn_attn", true},
                         {"no_bias", true}};
  test::TempDir tmp;
  write_checkpoint(tmp.path / "qwen1", out, qcfg);
  test::expect_matches_golden(tmp.path / "qwen1", golden, 2);
}

TEST(RelayoutFamilies, GlmForCausalLMFromChatGlmGolden) {
  const fs::path golden = test::testdata("golden/chatglm_glm4");
  const auto cfg = test::read_json(golden / "hf" / "config.json");
  io::SafetensorsCheckpoint ck((golden / "hf").string());
  const int64_t H = cfg["hidden_size"], NH = cfg["num_attention_heads"], G = cfg["multi_query_group_num"];
  const int64_t D = cfg["kv_channels"], L = cfg["num_layers"];
  std::map<std::string, Tensor> out;
  out["model.embed_tokens.weight"] = load(ck, "transformer.embedding.word_embeddings.weight");
  out["lm_head.weight"] = load(ck, "transformer.output_layer.weight");
  out["model.norm.weight"] = load(ck, "transformer.encoder.final_layernorm.weight");
  for (int64_t l = 0; l < L; ++l) {
    const std::string s = "transformer.encoder.layers." + std::to_string(l) + ".",
                      d = "model.layers." + std::to_string(l) + ".";
    out[d + "input_layernorm.weight"] = load(ck, s + "input_layernorm.weight");
    out[d + "post_attention_layernorm.weight"] = load(ck, s + "post_attention_layernorm.weight");
    for (const char* kind : {"weight", "bias"}) {
      const Tensor qkv = load(ck, s + "self_attention.query_key_value." + kind);
      out[d + "self_attn.q_proj." + kind] = rows(qkv, 0, NH * D);
      out[d + "self_attn.k_proj." + kind] = rows(qkv, NH * D, (NH + G) * D);
      out[d + "self_attn.v_proj." + kind] = rows(qkv, (NH + G) * D, (NH + 2 * G) * D);
    }
    out[d + "self_attn.o_proj.weight"] = load(ck, s + "self_attention.dense.weight");
    out[d + "mlp.gate_up_proj.weight"] = load(ck, s + "mlp.dense_h_to_4h.weight");
    out[d + "mlp.down_proj.weight"] = load(ck, s + "mlp.dense_4h_to_h.weight");
  }
  nlohmann::json gcfg = {{"architectures", {"GlmForCausalLM"}},
                         {"hidden_size", H},
                         {"intermediate_size", cfg["ffn_hidden_size"]},
                         {"num_hidden_layers", L},
                         {"num_attention_heads", NH},
                         {"num_key_value_heads", G},
                         {"head_dim", D},
                         {"partial_rotary_factor", 0.5},
                         {"rope_theta", 10000.0 * cfg["rope_ratio"].get<double>()},
                         {"rms_norm_eps", cfg["layernorm_epsilon"]},
                         {"vocab_size", cfg["padded_vocab_size"]},
                         {"attention_bias", true},
                         {"tie_word_embeddings", false},
                         {"max_position_embeddings", 8192}};
  test::TempDir tmp;
  write_checkpoint(tmp.path / "glm", out, gcfg);
  test::expect_matches_golden(tmp.path / "glm", golden, 2);
}

}  // namespace
}  // namespace rinfer

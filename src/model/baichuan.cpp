// Baichuan / Baichuan2 (BaichuanForCausalLM): the LLaMA layout with q, k, v
// fused in W_pack. Two position schemes share the class name:
//  * 7B: RoPE (rotate_half) — stored rotary_emb.inv_freq buffers are dropped;
//  * 13B: ALiBi, no rotary.
// config.json does not say which. The official code ships a different
// modeling file per size; rinfer follows vLLM / llama.cpp: an explicit
// "position_embedding" key if present, else ALiBi for the 13B shape
// (hidden_size 5120 or 40 layers) and RoPE otherwise.
// Baichuan2 (vocab 125696) normalizes lm_head rows at inference (NormHead);
// rinfer does it once at conversion.
#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/fused_source.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"

namespace rinfer {
namespace {

constexpr int64_t kBaichuan2Vocab = 125696;

bool uses_alibi(const nlohmann::json& j, const ModelConfig& c) {
  auto pe = j.find("position_embedding");
  if (pe != j.end() && pe->is_string()) {
    std::string v = pe->get<std::string>();
    RINFER_CHECK(v == "ALIBI" || v == "ROPE", "config.json: position_embedding must be ALIBI or ROPE, got ", v);
    return v == "ALIBI";
  }
  return c.hidden_size == 5120 || c.n_layers == 40;
}

class BaichuanArchitecture : public Architecture {
 public:
  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = "BaichuanForCausalLM";
    nlohmann::json jj = j;
    if (!jj.contains("max_position_embeddings") && jj.contains("model_max_length"))
      jj["max_position_embeddings"] = jj["model_max_length"];
    parse_llama_common(jj, c);
    RINFER_CHECK(c.n_kv_heads == c.n_heads, "config.json: Baichuan uses multi-head attention (no num_key_value_heads)");
    c.family["position"] = uses_alibi(j, c) ? "alibi" : "rope";
    c.family["norm_head"] = c.vocab_size == kBaichuan2Vocab;
    c.validate();
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    return llama_tensor_specs(c, group);
  }
  std::vector<TensorSpec> hf_tensor_specs(const ModelConfig& c, int64_t group) const override {
    std::vector<TensorSpec> out;
    for (auto& spec : llama_tensor_specs(c, group)) {
      const auto pos = spec.name.find("self_attn.q_proj.weight");
      if (pos != std::string::npos)
        out.push_back({spec.name.substr(0, pos) + "self_attn.W_pack.weight", {3 * c.hidden_size, c.hidden_size},
                       TensorRole::Matrix});
      else if (spec.name.find("self_attn.k_proj.weight") == std::string::npos &&
               spec.name.find("self_attn.v_proj.weight") == std::string::npos)
        out.push_back(spec);
    }
    return out;
  }
  void read_hf_rows(const ModelConfig& c, const TensorSpec& spec, const io::SafetensorsCheckpoint& hf, int64_t row0,
                    int64_t row1, float* dst) const override {
    const int64_t H = c.hidden_size;
    for (int part = 0; part < 3; ++part) {
      static const char* kNames[] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"};
      const auto pos = spec.name.find(kNames[part]);
      if (pos == std::string::npos) continue;
      const std::string pack = spec.name.substr(0, pos) + "self_attn.W_pack.weight";
      read_rows_from(c, hf, spec, {pack, {3 * H, H}, part * H}, row0, row1, dst);
      return;
    }
    Architecture::read_hf_rows(c, spec, hf, row0, row1, dst);
    if (spec.name == "lm_head.weight" && c.family.value("norm_head", false)) {
      for (int64_t r = 0; r < row1 - row0; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < H; ++i) ss += double(dst[r * H + i]) * dst[r * H + i];
        // torch.nn.functional.normalize: x / max(||x||, 1e-12)
        const float inv = float(1.0 / std::max(std::sqrt(ss), 1e-12));
        for (int64_t i = 0; i < H; ++i) dst[r * H + i] *= inv;
      }
    }
  }
  bool ignored_hf_tensor(const ModelConfig&, const std::string& name) const override {
    return name.find("rotary_emb.inv_freq") != std::string::npos;
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, const Shard& shard) const override {
    if (c.family.value("position", "rope") != "alibi") return make_llama_decoder(c, w, shard);
    auto slopes = alibi_slopes(c.n_heads);
    return make_llama_decoder(c, w, shard, {}, [&](int64_t l) { return make_llama_attention(c, w, shard, l, nullptr, slopes); });
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(baichuan, "BaichuanForCausalLM", BaichuanArchitecture);

}  // namespace rinfer

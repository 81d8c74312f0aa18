// GlmForCausalLM (transformers' native GLM-4 classes, e.g. glm-4-9b-chat-hf):
// the GLM-4 model in LLaMA-style names — q/k/v with biases, fused
// mlp.gate_up_proj [gate; up], explicit head_dim, and RoPE on the first
// partial_rotary_factor of each head with adjacent pairs. The converter
// splits gate_up_proj; at run time it is the GLM decoder.
#include "core/error.h"
#include "io/safetensors.h"
#include "model/fused_source.h"
#include "model/llama_config.h"
#include "model/llama_layout.h"

namespace rinfer {
namespace {

class GlmArchitecture : public Architecture {
 public:
  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = "GlmForCausalLM";
    parse_llama_common(j, c);
    c.qkv_bias = hf::get_bool(j, "attention_bias", true);
    const double factor = hf::get_double(j, "partial_rotary_factor", 0.5);
    const int64_t rot = int64_t(double(c.head_dim) * factor);
    RINFER_CHECK(factor > 0 && factor <= 1 && rot % 2 == 0 && rot > 0,
                 "config.json: partial_rotary_factor must give an even rotary dimension");
    c.family["rotary_dim"] = rot;
    c.validate();
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    return llama_tensor_specs(c, group);
  }
  std::vector<TensorSpec> hf_tensor_specs(const ModelConfig& c, int64_t group) const override {
    std::vector<TensorSpec> out;
    for (auto spec : llama_tensor_specs(c, group)) {
      const auto pos = spec.name.find("mlp.gate_proj.weight");
      if (pos != std::string::npos)
        out.push_back({spec.name.substr(0, pos) + "mlp.gate_up_proj.weight", {2 * c.intermediate_size, c.hidden_size},
                       TensorRole::Matrix});
      else if (spec.name.find("mlp.up_proj.weight") == std::string::npos)
        out.push_back(spec);
    }
    return out;
  }
  void read_hf_rows(const ModelConfig& c, const TensorSpec& spec, const io::SafetensorsCheckpoint& hf, int64_t row0,
                    int64_t row1, float* dst) const override {
    const int64_t I = c.intermediate_size, H = c.hidden_size;
    for (const char* part : {"mlp.gate_proj.weight", "mlp.up_proj.weight"}) {
      const auto pos = spec.name.find(part);
      if (pos == std::string::npos) continue;
      const bool up = std::string(part) == "mlp.up_proj.weight";
      read_rows_from(c, hf, spec, {spec.name.substr(0, pos) + "mlp.gate_up_proj.weight", {2 * I, H}, up ? I : 0}, row0,
                     row1, dst);
      return;
    }
    Architecture::read_hf_rows(c, spec, hf, row0, row1, dst);
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, ThreadPool& pool) const override {
    auto rope = std::make_shared<const RotaryEmbedding>(c, c.family.at("rotary_dim").get<int64_t>(),
                                                        kernels::cpu::RopeStyle::Interleaved);
    return make_llama_decoder(c, w, pool, {}, [&](int64_t l) { return make_llama_attention(c, w, l, rope); });
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(glm, "GlmForCausalLM", GlmArchitecture);

}  // namespace rinfer

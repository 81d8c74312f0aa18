// Qwen2 / Qwen2.5 (Qwen2ForCausalLM): the LLaMA layout with biases on the q,
// k and v projections (none on o), usually tied embeddings on small sizes.
#include "core/error.h"
#include "model/llama_layout.h"
#include "model/llama_config.h"

namespace rinfer {
namespace {

class Qwen2Architecture : public Architecture {
 public:
  ModelConfig parse_hf_config(const nlohmann::json& j) const override {
    ModelConfig c;
    c.architecture = "Qwen2ForCausalLM";
    parse_llama_common(j, c);
    c.qkv_bias = true;
    // Sliding window attention is off in every released Qwen2/2.5 config;
    // rinfer does not implement it, so refuse rather than run it wrong.
    RINFER_CHECK(!hf::get_bool(j, "use_sliding_window", false),
                 "config.json: use_sliding_window=true is not supported");
    c.validate();
    return c;
  }
  std::vector<TensorSpec> tensor_specs(const ModelConfig& c, int64_t group) const override {
    return llama_tensor_specs(c, group);
  }
  bool ignored_hf_tensor(const ModelConfig&, const std::string& name) const override {
    return name.find("rotary_emb.inv_freq") != std::string::npos;
  }
  std::unique_ptr<Model> create(const ModelConfig& c, const WeightStore& w, ThreadPool& pool) const override {
    return make_llama_decoder(c, w, pool);
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(qwen2, "Qwen2ForCausalLM", Qwen2Architecture);

}  // namespace rinfer

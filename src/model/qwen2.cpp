// Qwen2 / Qwen2.5 (Qwen2ForCausalLM): the LLaMA layout with biases on the q,
// k and v projections (none on o), usually tied embeddings on small sizes.
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_like.h"

namespace rinfer {
namespace {

class Qwen2Architecture : public LlamaLikeArchitecture {
 public:
  Qwen2Architecture() : LlamaLikeArchitecture("Qwen2ForCausalLM") {}

 protected:
  void configure(const nlohmann::json& j, ModelConfig& c) const override {
    c.qkv_bias = true;
    // Sliding window attention is off in every released Qwen2/2.5 config;
    // rinfer does not implement it, so refuse rather than run it wrong.
    RINFER_CHECK(!hf::get_bool(j, "use_sliding_window", false),
                 "config.json: use_sliding_window=true is not supported");
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(qwen2, "Qwen2ForCausalLM", Qwen2Architecture);

}  // namespace rinfer

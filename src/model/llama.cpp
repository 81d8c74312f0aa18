// LLaMA family: LlamaForCausalLM (LLaMA 1/2/3, TinyLlama, DeepSeek-LLM dense,
// Yi, ...) and MistralForCausalLM. HF layout, rotate_half RoPE (the HF
// checkpoints' q/k rows are already permuted for it: never un-permute).
#include "core/error.h"
#include "model/llama_config.h"
#include "model/llama_like.h"

namespace rinfer {

void parse_llama_common(const nlohmann::json& j, ModelConfig& c) {
  c.vocab_size = hf::get_int(j, "vocab_size");
  c.hidden_size = hf::get_int(j, "hidden_size");
  c.intermediate_size = hf::get_int(j, "intermediate_size");
  c.n_layers = hf::get_int(j, "num_hidden_layers");
  c.n_heads = hf::get_int(j, "num_attention_heads");
  c.n_kv_heads = hf::get_int(j, "num_key_value_heads", c.n_heads);
  RINFER_CHECK(c.n_heads > 0, "config.json: num_attention_heads must be positive");
  c.head_dim = hf::get_int(j, "head_dim", c.hidden_size / c.n_heads);
  c.rms_norm_eps = hf::get_double(j, "rms_norm_eps", 1e-6);
  c.rope_theta = hf::get_double(j, "rope_theta", 10000.0);
  c.max_position_embeddings = hf::get_int(j, "max_position_embeddings", 2048);
  c.tie_word_embeddings = hf::get_bool(j, "tie_word_embeddings", false);
  auto act = j.find("hidden_act");
  if (act != j.end() && !act->is_null())
    RINFER_CHECK(act->is_string() && (*act == "silu" || *act == "swish"),
                 "config.json: hidden_act ", act->dump(), " is not supported (only silu)");
  auto bos = hf::get_id_list(j, "bos_token_id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  c.eos_token_ids = hf::get_id_list(j, "eos_token_id");

  auto rs = j.find("rope_scaling");
  if (rs != j.end() && !rs->is_null()) {
    RINFER_CHECK(rs->is_object(), "config.json: rope_scaling must be an object or null");
    std::string type;
    if (rs->contains("rope_type") && (*rs)["rope_type"].is_string())
      type = (*rs)["rope_type"].get<std::string>();
    else if (rs->contains("type") && (*rs)["type"].is_string())
      type = (*rs)["type"].get<std::string>();
    if (type == "default" || type.empty()) type = "none";
    RINFER_CHECK(type == "none" || type == "linear" || type == "dynamic" || type == "llama3",
                 "config.json: rope_scaling type \"", type,
                 "\" is not supported for this architecture (supported: linear, dynamic, llama3)");
    c.rope_scaling.type = type;
    if (type != "none") {
      c.rope_scaling.factor = hf::get_double(*rs, "factor", 1.0);
      RINFER_CHECK(c.rope_scaling.factor >= 1.0, "config.json: rope_scaling.factor must be >= 1");
    }
    if (type == "llama3") {
      c.rope_scaling.low_freq_factor = hf::get_double(*rs, "low_freq_factor", 1.0);
      c.rope_scaling.high_freq_factor = hf::get_double(*rs, "high_freq_factor", 4.0);
      c.rope_scaling.original_max_position = hf::get_int(*rs, "original_max_position_embeddings");
      RINFER_CHECK(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor,
                   "config.json: rope_scaling.high_freq_factor must exceed low_freq_factor");
    }
    if (type == "dynamic")
      c.rope_scaling.original_max_position =
          hf::get_int(*rs, "original_max_position_embeddings", c.max_position_embeddings);
  }
}

namespace {

class LlamaArchitecture : public LlamaLikeArchitecture {
 public:
  explicit LlamaArchitecture(std::string name = "LlamaForCausalLM") : LlamaLikeArchitecture(std::move(name)) {}

 protected:
  void configure(const nlohmann::json& j, ModelConfig& c) const override {
    c.qkv_bias = c.o_bias = hf::get_bool(j, "attention_bias", false);
    c.mlp_bias = hf::get_bool(j, "mlp_bias", false);
  }
};

class MistralArchitecture : public LlamaArchitecture {
 public:
  MistralArchitecture() : LlamaArchitecture("MistralForCausalLM") {}

 protected:
  void configure(const nlohmann::json& j, ModelConfig& c) const override {
    LlamaArchitecture::configure(j, c);
    // rinfer attends over the full context; with a sliding window that is
    // only exact up to the window, so the usable context stops there.
    int64_t window = hf::get_int(j, "sliding_window", 0);
    if (window > 0 && window < c.max_position_embeddings) c.max_position_embeddings = window;
  }
};

}  // namespace

RINFER_REGISTER_ARCHITECTURE(llama, "LlamaForCausalLM", LlamaArchitecture);
RINFER_REGISTER_ARCHITECTURE(mistral, "MistralForCausalLM", MistralArchitecture);

}  // namespace rinfer

#pragma once
// ModelConfig: the hyper-parameters rinfer needs, normalized from whatever a
// family's config.json calls them. Stored in model_desc.json of converted
// models, so a converted model never needs the original config.json.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rinfer {

struct RopeScaling {
  std::string type = "none";  // none | linear | dynamic | llama3 | yarn (DeepSeek's)
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_position = 0;  // llama3, yarn (and dynamic: defaults to max_position_embeddings)
  double beta_fast = 32.0, beta_slow = 1.0;     // yarn: rotation counts bounding the frequency ramp
  double mscale = 1.0, mscale_all_dim = 0.0;    // yarn: magnitude corrections
};

// YaRN's magnitude correction 0.1 * m * ln(factor) + 1 (1 when factor <= 1).
double yarn_get_mscale(double factor, double m);

struct ModelConfig {
  std::string architecture;  // Hugging Face class name, e.g. "LlamaForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // biases on q, k, v projections
  bool o_bias = false;    // bias on the attention output projection
  bool mlp_bias = false;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
  // Hyper-parameters only one family uses (MoE routing, latent attention,
  // partial rotary, ALiBi, ...), kept as that family's own JSON object so the
  // common config stays small. Saved in model_desc.json like the rest.
  nlohmann::json family = nlohmann::json::object();

  nlohmann::json to_json() const;
  static ModelConfig from_json(const nlohmann::json& j);
  // Throws rinfer::Error when the numbers cannot describe a model.
  void validate() const;
};

// The largest magnitude of an integer in config.json (a size, a count, an id,
// a position): 2^26 is above every real model's (vocabularies of 256K,
// contexts of 10M), and sums and products of two such values (the tensor
// shapes the families derive, n_heads * (qk + v)) stay far inside int64.
inline constexpr int64_t kMaxConfigInt = int64_t(1) << 26;
// Layers and MoE experts are also loop counts over tensor specs: bounded
// tighter, far above real models (a few hundred of each).
inline constexpr int64_t kMaxLayers = 4096;
inline constexpr int64_t kMaxExperts = 4096;

// Helpers for reading Hugging Face config.json values with one-line errors.
namespace hf {
int64_t get_int(const nlohmann::json& cfg, const char* key);
int64_t get_int(const nlohmann::json& cfg, const char* key, int64_t fallback);
double get_double(const nlohmann::json& cfg, const char* key, double fallback);
bool get_bool(const nlohmann::json& cfg, const char* key, bool fallback);
// eos_token_id may be an int, a list of ints or null.
std::vector<int32_t> get_id_list(const nlohmann::json& cfg, const char* key);
}  // namespace hf

}  // namespace rinfer

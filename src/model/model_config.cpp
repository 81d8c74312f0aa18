#include "model/model_config.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace rinfer {

using nlohmann::json;

namespace hf {
int64_t get_int(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) fail("config.json: missing required key \"", key, "\"");
  if (!it->is_number_integer()) fail("config.json: \"", key, "\" must be an integer, got ", it->dump());
  // Bounded here, where every config.json integer is read, so that no
  // family's arithmetic on them (shapes, sums of head dims) can overflow.
  const bool in_range = it->is_number_unsigned() ? it->get<uint64_t>() <= uint64_t(kMaxConfigInt)
                                                 : std::llabs(it->get<int64_t>()) <= kMaxConfigInt;
  if (!in_range) fail("config.json: \"", key, "\" is out of range (at most ", kMaxConfigInt, "), got ", it->dump());
  return it->get<int64_t>();
}
int64_t get_int(const json& cfg, const char* key, int64_t fallback) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  return get_int(cfg, key);
}
double get_double(const json& cfg, const char* key, double fallback) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail("config.json: \"", key, "\" must be a number, got ", it->dump());
  return it->get<double>();
}
bool get_bool(const json& cfg, const char* key, bool fallback) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail("config.json: \"", key, "\" must be true or false, got ", it->dump());
  return it->get<bool>();
}
std::vector<int32_t> get_id_list(const json& cfg, const char* key) {
  std::vector<int32_t> out;
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return out;
  auto id = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      fail("config.json: \"", key, "\" must hold token ids (integers >= 0), got ", it->dump());
    return v.get<int32_t>();
  };
  if (it->is_number_integer()) {
    out.push_back(id(*it));
  } else if (it->is_array()) {
    for (const auto& v : *it) out.push_back(id(v));
  } else {
    fail("config.json: \"", key, "\" must be an integer or a list, got ", it->dump());
  }
  return out;
}
}  // namespace hf

double yarn_get_mscale(double factor, double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

json ModelConfig::to_json() const {
  return json{{"architecture", architecture},
              {"vocab_size", vocab_size},
              {"hidden_size", hidden_size},
              {"intermediate_size", intermediate_size},
              {"n_layers", n_layers},
              {"n_heads", n_heads},
              {"n_kv_heads", n_kv_heads},
              {"head_dim", head_dim},
              {"rms_norm_eps", rms_norm_eps},
              {"rope_theta", rope_theta},
              {"rope_scaling",
               {{"type", rope_scaling.type},
                {"factor", rope_scaling.factor},
                {"low_freq_factor", rope_scaling.low_freq_factor},
                {"high_freq_factor", rope_scaling.high_freq_factor},
                {"original_max_position", rope_scaling.original_max_position},
                {"beta_fast", rope_scaling.beta_fast},
                {"beta_slow", rope_scaling.beta_slow},
                {"mscale", rope_scaling.mscale},
                {"mscale_all_dim", rope_scaling.mscale_all_dim}}},
              {"max_position_embeddings", max_position_embeddings},
              {"tie_word_embeddings", tie_word_embeddings},
              {"qkv_bias", qkv_bias},
              {"o_bias", o_bias},
              {"mlp_bias", mlp_bias},
              {"bos_token_id", bos_token_id},
              {"eos_token_ids", eos_token_ids},
              {"family", family}};
}

namespace {
// model_desc.json's numbers are read with get<int64_t>/get<float> here and in
// every family (c.family): a float out of the target's range would be
// undefined behaviour there, so every number is bounded once, on load.
// No real value (sizes, counts, scaling factors) comes near the bound.
void check_desc_numbers(const json& v, const std::string& where) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > double(kMaxConfigInt))
      fail("model_desc.json: bad \"config\": ", where, " is out of range, got ", v.dump());
  } else if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t(kMaxConfigInt))
      fail("model_desc.json: bad \"config\": ", where, " is out of range, got ", v.dump());
  } else if (v.is_number_integer()) {
    if (std::llabs(v.get<int64_t>()) > kMaxConfigInt)
      fail("model_desc.json: bad \"config\": ", where, " is out of range, got ", v.dump());
  } else if (v.is_object()) {
    for (const auto& [k, e] : v.items()) check_desc_numbers(e, where + "." + k);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) check_desc_numbers(v[i], where + "[" + std::to_string(i) + "]");
  }
}
// Integer fields must be integers: a float would be truncated silently.
int64_t desc_int(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) fail("model_desc.json: bad \"config\": \"", key, "\" must be an integer, got ", v.dump());
  return v.get<int64_t>();
}
}  // namespace

ModelConfig ModelConfig::from_json(const json& j) {
  try {
    if (!j.is_object()) fail("model_desc.json: bad \"config\": not an object");
    for (const auto& [k, v] : j.items())
      if (k != "rms_norm_eps" && k != "rope_theta") check_desc_numbers(v, k);
    ModelConfig c;
    c.architecture = j.at("architecture").get<std::string>();
    c.vocab_size = desc_int(j, "vocab_size");
    c.hidden_size = desc_int(j, "hidden_size");
    c.intermediate_size = desc_int(j, "intermediate_size");
    c.n_layers = desc_int(j, "n_layers");
    c.n_heads = desc_int(j, "n_heads");
    c.n_kv_heads = desc_int(j, "n_kv_heads");
    c.head_dim = desc_int(j, "head_dim");
    c.rms_norm_eps = j.at("rms_norm_eps").get<double>();
    c.rope_theta = j.at("rope_theta").get<double>();
    const auto& rs = j.at("rope_scaling");
    c.rope_scaling.type = rs.at("type").get<std::string>();
    c.rope_scaling.factor = rs.at("factor").get<double>();
    c.rope_scaling.low_freq_factor = rs.at("low_freq_factor").get<double>();
    c.rope_scaling.high_freq_factor = rs.at("high_freq_factor").get<double>();
    c.rope_scaling.original_max_position = desc_int(rs, "original_max_position");
    c.rope_scaling.beta_fast = rs.value("beta_fast", 32.0);
    c.rope_scaling.beta_slow = rs.value("beta_slow", 1.0);
    c.rope_scaling.mscale = rs.value("mscale", 1.0);
    c.rope_scaling.mscale_all_dim = rs.value("mscale_all_dim", 0.0);
    c.max_position_embeddings = desc_int(j, "max_position_embeddings");
    c.tie_word_embeddings = j.at("tie_word_embeddings").get<bool>();
    c.qkv_bias = j.at("qkv_bias").get<bool>();
    c.o_bias = j.at("o_bias").get<bool>();
    c.mlp_bias = j.at("mlp_bias").get<bool>();
    c.bos_token_id = j.at("bos_token_id").get<int32_t>();
    c.eos_token_ids = j.at("eos_token_ids").get<std::vector<int32_t>>();
    if (j.contains("family")) c.family = j.at("family");
    c.validate();
    return c;
  } catch (const json::exception& e) {
    fail("model_desc.json: bad \"config\": ", e.what());
  }
}

void ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* what) {
    RINFER_CHECK(v > 0, "config: ", what, " must be positive, got ", v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(n_layers, "num_hidden_layers");
  positive(n_heads, "num_attention_heads");
  positive(n_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  // model_desc.json's numbers do not pass through hf::get_int: the same bound.
  for (auto [v, what] : {std::pair{vocab_size, "vocab_size"}, {hidden_size, "hidden_size"},
                         {intermediate_size, "intermediate_size"}, {n_heads, "num_attention_heads"},
                         {n_kv_heads, "num_key_value_heads"}, {head_dim, "head_dim"},
                         {max_position_embeddings, "max_position_embeddings"}})
    RINFER_CHECK(v <= kMaxConfigInt, "config: ", what, " is out of range (at most ", kMaxConfigInt, "), got ", v);
  RINFER_CHECK(n_layers <= kMaxLayers, "config: num_hidden_layers is out of range (at most ", kMaxLayers, "), got ",
               n_layers);
  RINFER_CHECK(n_heads % n_kv_heads == 0, "config: num_attention_heads (", n_heads,
               ") must be a multiple of num_key_value_heads (", n_kv_heads, ")");
  RINFER_CHECK(head_dim % 2 == 0, "config: head_dim must be even for rotary embeddings, got ", head_dim);
  RINFER_CHECK(rms_norm_eps > 0, "config: rms_norm_eps must be positive");
  RINFER_CHECK(rope_theta > 0, "config: rope_theta must be positive");
}

}  // namespace rinfer

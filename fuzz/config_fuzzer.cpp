// config.json and friends: the input as a Hugging Face config.json
// (HfCheckpoint::parse_config: the architecture registry and each family's
// parse_hf_config, ModelConfig::validate, quantization_config), the tensor
// specs of the global group and of the first and last layer, the
// model_desc.json round trip (to_json / from_json); the same text as a
// tokenizer_config.json (parse_hf_tokenizer_config_json).
#include "convert/hf_checkpoint.h"
#include "core/json_file.h"
#include "fuzz_util.h"
#include "model/architecture.h"
#include "tokenizer/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using rinfer::fuzz::expect_rejections;
  const std::string_view text = rinfer::fuzz::as_text(data, size);
  nlohmann::json j;
  try {
    j = rinfer::parse_json_text(text, "config.json");
  } catch (const rinfer::Error&) {
    return 0;
  }
  expect_rejections([&] {
    const rinfer::HfCheckpoint ck = rinfer::HfCheckpoint::parse_config(j, "config.json");
    const rinfer::ModelConfig& c = ck.config;
    for (int64_t g : {rinfer::kGlobalGroup, int64_t(0), c.n_layers - 1}) ck.arch->tensor_specs(c, g);
    ck.arch->hf_tensor_specs(c, 0);
    // What `rinfer convert` stores in model_desc.json must load back.
    const rinfer::ModelConfig back = rinfer::ModelConfig::from_json(c.to_json());
    if (back.n_layers != c.n_layers || back.architecture != c.architecture) __builtin_trap();
  });
  // model_desc.json's "config" (a converted model directory).
  expect_rejections([&] {
    if (j.is_object() && j.contains("config")) rinfer::ModelConfig::from_json(j.at("config"));
  });
  expect_rejections([&] { rinfer::parse_hf_tokenizer_config_json(text, "tokenizer_config.json"); });
  return 0;
}

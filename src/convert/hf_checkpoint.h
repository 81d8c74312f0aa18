#pragma once
// HfCheckpoint: a Hugging Face model directory opened for reading —
// config.json parsed by its architecture, tensors from safetensors.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "io/safetensors.h"
#include "model/architecture.h"

namespace rinfer {

struct HfCheckpoint {
  std::string dir;
  nlohmann::json hf_config;
  const Architecture* arch = nullptr;
  ModelConfig config;
  std::unique_ptr<io::SafetensorsCheckpoint> tensors;

  // Throws a one-line rinfer::Error for a missing directory, a missing or
  // malformed config.json, an unknown architecture (listing the supported
  // ones) or unusable safetensors.
  static HfCheckpoint open(const std::string& dir);
  // The config.json half of open(): `cfg` parsed by its architecture into
  // hf_config, arch and config (tensors stay empty); `cfg_path` names it in
  // the errors.
  static HfCheckpoint parse_config(nlohmann::json cfg, const std::string& cfg_path);
  // The dtype most of the weight matrices are stored in (F32, F16 or BF16).
  DType storage_dtype() const;
};


}  // namespace rinfer

#include "convert/hf_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace fs = std::filesystem;

namespace rinfer {

HfCheckpoint HfCheckpoint::open(const std::string& dir) {
  RINFER_CHECK(fs::exists(dir), "model directory ", dir, " does not exist");
  RINFER_CHECK(fs::is_directory(dir), dir, " is not a directory");
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  RINFER_CHECK(fs::exists(cfg_path), "no config.json in ", dir, " (expected a Hugging Face checkpoint directory)");
  HfCheckpoint ck = parse_config(read_json_file(cfg_path), cfg_path);
  ck.dir = dir;
  ck.tensors = std::make_unique<io::SafetensorsCheckpoint>(dir);
  return ck;
}

HfCheckpoint HfCheckpoint::parse_config(nlohmann::json cfg, const std::string& cfg_path) {
  HfCheckpoint ck;
  ck.hf_config = std::move(cfg);
  RINFER_CHECK(ck.hf_config.is_object(), cfg_path, ": expected a JSON object");
  auto archs = ck.hf_config.find("architectures");
  RINFER_CHECK(archs != ck.hf_config.end() && archs->is_array() && !archs->empty() && (*archs)[0].is_string(),
               cfg_path, ": missing \"architectures\" (e.g. [\"LlamaForCausalLM\"])");
  ck.arch = &find_architecture((*archs)[0].get<std::string>());
  try {
    ck.config = ck.arch->parse_hf_config(ck.hf_config);
  } catch (const nlohmann::json::exception& e) {
    fail(cfg_path, ": ", e.what());
  }
  auto q = ck.hf_config.find("quantization_config");
  if (q != ck.hf_config.end() && !q->is_null()) try {
    // Block-scaled FP8 (DeepSeek-V3) is dequantized by the converter; other
    // schemes (GPTQ, AWQ, bitsandbytes) need their own readers.
    const std::string method = q->is_object() ? q->value("quant_method", "") : "";
    RINFER_CHECK(method == "fp8", cfg_path, ": quantization_config quant_method \"", method,
                 "\" is not supported (supported: fp8 with block scales)");
    const std::string fmt = q->value("fmt", "e4m3");
    RINFER_CHECK(fmt == "e4m3", cfg_path, ": FP8 format \"", fmt, "\" is not supported (e4m3)");
    std::vector<int64_t> block = {128, 128};
    if (q->contains("weight_block_size")) block = (*q)["weight_block_size"].get<std::vector<int64_t>>();
    RINFER_CHECK(block.size() == 2 && block[0] > 0 && block[1] > 0, cfg_path,
                 ": weight_block_size must be two positive integers");
    ck.config.family["fp8_weight_block"] = block;
  } catch (const nlohmann::json::exception& e) {
    fail(cfg_path, ": bad quantization_config: ", e.what());
  }
  return ck;
}

DType HfCheckpoint::storage_dtype() const {
  for (const auto& spec : arch->tensor_specs(config, kGlobalGroup))
    if (const auto* e = tensors->find(spec.name))
      if (e->dtype == DType::F32 || e->dtype == DType::F16 || e->dtype == DType::BF16) return e->dtype;
  return DType::F32;
}

}  // namespace rinfer

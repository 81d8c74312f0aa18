#include "convert/hf_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace fs = std::filesystem;

namespace rinfer {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  RINFER_CHECK(in, "cannot read ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, " is not valid JSON: ", e.what());
  }
}

HfCheckpoint HfCheckpoint::open(const std::string& dir) {
  RINFER_CHECK(fs::exists(dir), "model directory ", dir, " does not exist");
  RINFER_CHECK(fs::is_directory(dir), dir, " is not a directory");
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  RINFER_CHECK(fs::exists(cfg_path), "no config.json in ", dir, " (expected a Hugging Face checkpoint directory)");
  HfCheckpoint ck;
  ck.dir = dir;
  ck.hf_config = read_json_file(cfg_path);
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
  ck.tensors = std::make_unique<io::SafetensorsCheckpoint>(dir);
  return ck;
}

DType HfCheckpoint::storage_dtype() const {
  for (const auto& spec : arch->tensor_specs(config, kGlobalGroup))
    if (const auto* e = tensors->find(spec.name))
      if (e->dtype == DType::F32 || e->dtype == DType::F16 || e->dtype == DType::BF16) return e->dtype;
  return DType::F32;
}

}  // namespace rinfer

#include "model/architecture.h"

#include <map>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/fused_source.h"

namespace rinfer {

namespace {
std::map<std::string, std::unique_ptr<Architecture>>& registry() {
  static std::map<std::string, std::unique_ptr<Architecture>> r;
  return r;
}
}  // namespace

ArchitectureRegistration::ArchitectureRegistration(const char* hf_name,
                                                   std::function<std::unique_ptr<Architecture>()> make) {
  registry()[hf_name] = make();
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& [name, arch] : registry()) names.push_back(name);
  return names;
}

const Architecture& find_architecture(const std::string& hf_name) {
  auto it = registry().find(hf_name);
  if (it == registry().end()) {
    std::string list;
    for (const auto& n : supported_architectures()) list += (list.empty() ? "" : ", ") + n;
    fail("unsupported architecture \"", hf_name, "\"; supported: ", list);
  }
  return *it->second;
}

std::vector<TensorSpec> all_tensor_specs(const Architecture& arch, const ModelConfig& cfg) {
  std::vector<TensorSpec> all;
  for (int64_t g = kGlobalGroup; g < cfg.n_layers; ++g) {
    auto specs = arch.tensor_specs(cfg, g);
    all.insert(all.end(), specs.begin(), specs.end());
  }
  return all;
}

void Architecture::read_hf_rows(const ModelConfig& cfg, const TensorSpec& spec, const io::SafetensorsCheckpoint& hf,
                                int64_t row0, int64_t row1, float* dst) const {
  read_rows_from(cfg, hf, spec, {spec.name, spec.shape, 0}, row0, row1, dst);
}

bool Architecture::ignored_hf_tensor(const ModelConfig& cfg, const std::string& name) const {
  // FP8 block scales are consumed with their weights.
  const std::string suffix = "_scale_inv";
  return cfg.family.contains("fp8_weight_block") && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace rinfer

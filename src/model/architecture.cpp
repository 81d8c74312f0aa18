#include "model/architecture.h"

#include <map>

#include "core/error.h"
#include "io/safetensors.h"

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

void Architecture::read_hf_rows(const ModelConfig&, const TensorSpec& spec, const io::SafetensorsCheckpoint& hf,
                                int64_t row0, int64_t row1, float* dst) const {
  TensorView src = hf.get(spec.name);
  RINFER_CHECK(src.shape == spec.shape, "tensor ", spec.name, " has shape ", shape_str(src.shape), ", expected ",
               shape_str(spec.shape), " in ", hf.dir());
  RINFER_CHECK(src.dtype == DType::F32 || src.dtype == DType::F16 || src.dtype == DType::BF16 || src.dtype == DType::F64,
               "tensor ", spec.name, " is stored as ", dtype_name(src.dtype), " in ", hf.dir(),
               "; rinfer reads F32, F16, BF16 and F64 weights");
  const int64_t row = spec.shape.empty() ? 1 : numel(spec.shape) / std::max<int64_t>(spec.shape[0], 1);
  const size_t esz = dtype_size(src.dtype);
  convert_to_f32(src.dtype, src.as<uint8_t>() + size_t(row0 * row) * esz, dst, size_t((row1 - row0) * row));
}

}  // namespace rinfer

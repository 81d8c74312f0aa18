#pragma once
// Architecture: everything rinfer knows about one Hugging Face model class —
// how to read its config.json, which tensors it has (by group: -1 for the
// embeddings / final norm / head, i for layer i), how to fetch them from the
// HF checkpoint (renames, splits of fused weights), and how to build the
// runnable Model. Families register themselves by HF class name (see
// RINFER_REGISTER_ARCHITECTURE), so adding one never touches the core.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "model/shard.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace rinfer::io {
class SafetensorsCheckpoint;
}

namespace rinfer {

enum class TensorRole {
  Matrix,     // projection weights: stored in the model dtype
  Embedding,  // token embedding table: stored in the model dtype
  Vector,     // norms and biases: always F32 (tiny, and precision matters)
};

struct TensorSpec {
  std::string name;  // rinfer name (HF name where the layout is unchanged)
  Shape shape;
  TensorRole role = TensorRole::Matrix;
};

constexpr int64_t kGlobalGroup = -1;

class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual ModelConfig parse_hf_config(const nlohmann::json& cfg) const = 0;
  virtual std::vector<TensorSpec> tensor_specs(const ModelConfig& cfg, int64_t group) const = 0;
  // The tensors of the original HF checkpoint (names, shapes), for writing
  // synthetic checkpoints. Default: the same as tensor_specs (no fused tensors).
  virtual std::vector<TensorSpec> hf_tensor_specs(const ModelConfig& cfg, int64_t group) const {
    return tensor_specs(cfg, group);
  }
  // Rows [row0, row1) of the tensor `spec` as f32, read from the HF checkpoint.
  // Default: the HF tensor of the same name, which must have spec.shape.
  virtual void read_hf_rows(const ModelConfig& cfg, const TensorSpec& spec, const io::SafetensorsCheckpoint& hf,
                            int64_t row0, int64_t row1, float* dst) const;
  // HF tensors the converter drops on purpose (e.g. stored rotary caches).
  // (The base class drops FP8 "*_scale_inv" tensors, which are read with their weights.)
  virtual bool ignored_hf_tensor(const ModelConfig& cfg, const std::string& name) const;
  // The runnable model, whole or the shard's part of it (tensor parallel:
  // model/layers.h; blocks that do not split are replicated).
  virtual std::unique_ptr<Model> create(const ModelConfig& cfg, const WeightStore& weights,
                                        const Shard& shard = {}) const = 0;
};

// The architecture registered for an HF class name; an unknown name throws an
// Error that lists the supported ones.
const Architecture& find_architecture(const std::string& hf_name);
std::vector<std::string> supported_architectures();

// All specs of a model, groups -1..n_layers-1 in order.
std::vector<TensorSpec> all_tensor_specs(const Architecture& arch, const ModelConfig& cfg);

struct ArchitectureRegistration {
  ArchitectureRegistration(const char* hf_name, std::function<std::unique_ptr<Architecture>()> make);
};

}  // namespace rinfer

// RINFER_REGISTER_ARCHITECTURE(id, "HFClassName", Type[, constructor args...])
#define RINFER_REGISTER_ARCHITECTURE(ID, HF_NAME, TYPE, ...)                  \
  static ::rinfer::ArchitectureRegistration rinfer_arch_registration_##ID( \
      HF_NAME, [] { return std::make_unique<TYPE>(__VA_ARGS__); })

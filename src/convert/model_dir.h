#pragma once
// The rinfer model directory:
//   model_desc.json          format version, architecture, normalized config,
//                            dtype per tensor role, source, converter, tensor index
//   embeddings.safetensors   token embeddings, final norm, lm_head
//   layer_000.safetensors …  one file per transformer layer
//   tokenizer files          copied from the checkpoint
#include <memory>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/converter.h"
#include "model/weights.h"

namespace rinfer {

constexpr int kModelFormatVersion = 1;
constexpr const char* kModelDescFile = "model_desc.json";
// "layout" of a BF16 matrix stored blocked (ConvertOptions::bf16_blocked).
constexpr const char* kBf16BlockedLayout = "bf16-blocked-8x32";

std::string group_file_name(int64_t group);  // "embeddings.safetensors", "layer_007.safetensors"
bool is_model_dir(const std::string& dir);    // has model_desc.json

// Writes each group's tensors to its safetensors file as the group ends, then
// model_desc.json from finish().
class ModelDirWriter : public WeightSink {
 public:
  ModelDirWriter(std::string dir, const HfCheckpoint& hf, const ConvertOptions& opts);
  void begin_group(int64_t group) override;
  void add(const TensorSpec& spec, DType dtype, Buffer&& data) override;
  void add_quantized(const TensorSpec& spec, const QuantInfo& q, Buffer&& data, Buffer&& scales) override;
  void add_blocked(const TensorSpec& spec, Buffer&& data) override;
  void end_group(int64_t group) override;
  void finish(const ConvertStats& stats);

 private:
  std::string dir_;
  const HfCheckpoint& hf_;
  ConvertOptions opts_;
  std::vector<std::pair<TensorSpec, std::pair<DType, Buffer>>> pending_;
  nlohmann::json tensors_ = nlohmann::json::object();
  std::vector<std::string> files_;
  nlohmann::json quant_ = nlohmann::json::object();  // per quantized tensor: its scheme
  std::map<std::string, Shape> blocked_;              // blocked BF16 matrices: logical [N, K]
};

// How loaded weights live in memory. Copy (the default) reads them into
// anonymous memory (huge pages), quantized matrices in the interleaved
// layout (kernels/cpu/ops.h: their scales inside the data, which the decode
// GEMVs stream faster); mmap maps the files and keeps the stored, separate
// layout (starts faster, decodes slower here: see docs/performance.md).
enum class WeightLoadMode { Copy, Mmap };

struct ModelDir {
  nlohmann::json desc;
  ModelConfig config;
  DType dtype = DType::F32;  // float dtype of the unquantized matrices and embeddings
  std::optional<kernels::cpu::QuantType> quant;  // quantized models ("matrix": "int8" / "int4")
  int64_t group_size = 0;                        // the largest group size used (for reports)
  std::unique_ptr<WeightStore> weights;
};

// The model's config from model_desc.json alone (no weight file opened).
ModelConfig read_model_dir_config(const std::string& dir);

// What the model's layers and its output layer (lm_head, or the tied token
// embeddings) take in their files, from model_desc.json alone.
struct StoredBytes {
  std::vector<double> layers;  // [n_layers]
  double head = 0;
};
StoredBytes read_model_dir_bytes(const std::string& dir, int64_t n_layers);

// wanted: the tensors to load (a pipeline stage's); the files that hold none
// of them are not opened. Empty: all. keep_mapped: float tensors left in
// the mapping even when `mode` copies (a table only looked up by row, whose
// untouched pages then never become resident).
ModelDir load_model_dir(const std::string& dir, WeightLoadMode mode, const TensorFilter& wanted = {},
                        const TensorFilter& keep_mapped = {});

}  // namespace rinfer

#pragma once
// The converter: HF checkpoint -> rinfer tensors, one group (the globals, then
// each layer) at a time, so memory stays near one layer however big the model.
// Where the tensors go is a WeightSink: a rinfer model directory on disk
// (ModelDirWriter) or a WeightStore in memory (running an HF dir directly).
#include <functional>
#include <string>
#include <vector>

#include <optional>

#include "convert/hf_checkpoint.h"
#include "core/buffer.h"
#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "model/weights.h"

namespace rinfer {

// Which tensors (by rinfer name) to load or convert; empty: all of them.
using TensorFilter = std::function<bool(const std::string& name)>;

struct ConvertOptions {
  DType dtype = DType::BF16;  // for matrices and embeddings (float dtype of the unquantized ones); vectors stay F32
  // Quantized weights (--dtype int8|int4): TensorRole::Matrix tensors become
  // symmetric per-group Q8/Q4 (kernels/cpu/ops.h layout), except lm_head and
  // MLA kv_b_proj (see quantize_tensor_policy); `dtype` is then the float
  // dtype of everything else (bf16).
  std::optional<kernels::cpu::QuantType> quant;
  // 0: default per type (128 for q8, 32 for q4), falling back per tensor to
  // the largest supported group <= default that divides K; a given value is
  // strict (tensors whose K is not a multiple stay in `dtype`).
  int64_t group_size = 0;
  // --lm-head int8|int4: the output layer quantized too (its type's default
  // group size, with the same per-K fallback), an option of quantized runs
  // only. Nothing: it stays in `dtype` (the default recipe). Where the
  // checkpoint ties lm_head to the token embeddings, the table is kept for
  // the lookup and a quantized copy is written as lm_head.weight.
  std::optional<kernels::cpu::QuantType> lm_head_quant;
  // BF16 projection matrices (the tensors Linear multiplies by: Matrix role,
  // N % 8 == 0, K % 32 == 0, not MLA kv_b_proj) are stored in the blocked
  // layout decode streams best (kernels/cpu/ops.h, matmul_bf16_blocked) as a
  // BF16 tensor of shape [N/8, K/32, 8, 32]; false keeps them [N, K].
  bool bf16_blocked = true;
  // In-memory loads of a pipeline stage: only these tensors (the others are
  // neither read nor counted as unused).
  TensorFilter wanted;
  bool progress = false;      // progress line on stderr
  ThreadPool* pool = nullptr;  // for quantization; null: the converter makes one
};

// The stored shape of a blocked BF16 [N, K] matrix: [N/8, K/32, 8, 32].
Shape bf16_blocked_shape(int64_t N, int64_t K);

// "f32"|"f16"|"bf16"|"int8"|"int4" -> float dtype + optional quant type.
struct WeightFormat {
  DType dtype = DType::BF16;
  std::optional<kernels::cpu::QuantType> quant;
};
std::optional<WeightFormat> parse_weight_format(const std::string& name);
// "int8" / "int4" / "bf16"...
std::string weight_format_name(DType dtype, std::optional<kernels::cpu::QuantType> quant);
int64_t default_group_size(kernels::cpu::QuantType t);  // 128 (q8), 32 (q4)

// How one tensor is stored in a quantized model: the quantized tensor
// "<name>" holds the packed data as U8 of shape [Np, K] (q8) or [Np, K/2]
// (q4), Np = round_up(N, 16); "<name>.qscale" holds the scales as F16 of
// shape [Np/16, K/group_size, 16]. Both shapes describe the scheme, so a
// loader can rebuild the QuantizedWeight from the two tensors alone;
// model_desc.json also records it per tensor.
constexpr const char* kQuantScaleSuffix = ".qscale";
struct QuantInfo {
  kernels::cpu::QuantType type = kernels::cpu::QuantType::Q8;
  int64_t group_size = 32;
  DType scale_dtype = DType::F16;
};
// The quant type and group size `opts` give tensor `spec` (nullopt: it stays
// in the float dtype).
std::optional<QuantInfo> quant_info_for(const ConvertOptions& opts, const TensorSpec& spec);

class WeightSink {
 public:
  virtual ~WeightSink() = default;
  virtual void begin_group(int64_t group) = 0;
  virtual void add(const TensorSpec& spec, DType dtype, Buffer&& data) = 0;
  // A quantized matrix: by default the two tensors described at QuantInfo.
  virtual void add_quantized(const TensorSpec& spec, const QuantInfo& q, Buffer&& data, Buffer&& scales);
  // A BF16 matrix in the blocked layout: by default one BF16 tensor of shape
  // [N/8, K/32, 8, 32] under the spec's name.
  virtual void add_blocked(const TensorSpec& spec, Buffer&& data);
  virtual void end_group(int64_t group) = 0;
};

// Keeps every tensor in anonymous memory inside a WeightStore; quantized
// matrices in the interleaved layout (WeightStore::add_quantized), as
// load_model_dir lays out a copied model.
class MemorySink : public WeightSink {
 public:
  explicit MemorySink(WeightStore& store) : store_(store) {}
  void begin_group(int64_t) override {}
  void add(const TensorSpec& spec, DType dtype, Buffer&& data) override;
  void add_quantized(const TensorSpec& spec, const QuantInfo& q, Buffer&& data, Buffer&& scales) override;
  void end_group(int64_t) override {}

 private:
  WeightStore& store_;
};

struct ConvertStats {
  uint64_t bytes_in = 0, bytes_out = 0;
  double seconds = 0;
  std::vector<std::string> unused_hf_tensors;
  int64_t quantized_tensors = 0;
  int64_t blocked_tensors = 0;  // BF16 matrices stored in the blocked layout
  std::vector<std::string> float_matrices;  // quantized runs: Matrix tensors kept in the float dtype
};

ConvertStats convert_tensors(const HfCheckpoint& hf, const ConvertOptions& opts, WeightSink& sink);

// Whole conversion to a rinfer model directory at `out_dir` (written under a
// temporary name and renamed at the end; an existing out_dir is an error).
ConvertStats convert_to_dir(const std::string& hf_dir, const std::string& out_dir, const ConvertOptions& opts);

}  // namespace rinfer

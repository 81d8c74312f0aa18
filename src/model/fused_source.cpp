#include "model/fused_source.h"

#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

namespace rinfer {

std::vector<TensorSpec> hf_specs_from_sources(const std::vector<TensorSpec>& specs,
                                              const std::function<HfSource(const std::string&)>& source) {
  std::vector<TensorSpec> out;
  for (const auto& spec : specs) {
    HfSource src = source(spec.name);
    bool seen = false;
    for (const auto& o : out) seen |= o.name == src.name;
    if (!seen) out.push_back({src.name, src.full_shape, spec.role});
  }
  return out;
}

void read_rows_from(const ModelConfig& cfg, const io::SafetensorsCheckpoint& hf, const TensorSpec& spec,
                    const HfSource& src, int64_t row0, int64_t row1, float* dst) {
  TensorView t = hf.get(src.name);
  RINFER_CHECK(t.shape == src.full_shape, "tensor ", src.name, " has shape ", shape_str(t.shape), ", expected ",
               shape_str(src.full_shape), " in ", hf.dir());
  const bool fp8 = t.dtype == DType::F8_E4M3;
  RINFER_CHECK(fp8 || t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16 ||
                   t.dtype == DType::F64,
               "tensor ", src.name, " is stored as ", dtype_name(t.dtype),
               "; rinfer reads F32, F16, BF16, F64 and block-scaled F8_E4M3 weights");
  const int64_t row_len = spec.shape.size() > 1 ? numel(spec.shape) / spec.shape[0] : 1;
  RINFER_ASSERT(src.row_offset + row1 <= (t.shape.empty() ? 1 : t.shape[0]));
  const size_t esz = dtype_size(t.dtype);
  convert_to_f32(t.dtype, t.as<uint8_t>() + size_t((src.row_offset + row0) * row_len) * esz, dst,
                 size_t((row1 - row0) * row_len));
  if (!fp8) return;
  // w = q * scale_inv[row / block_rows][col / block_cols]
  RINFER_CHECK(t.shape.size() == 2, "FP8 tensor ", src.name, " must be 2-D");
  const std::string scale_name = src.name + "_scale_inv";
  RINFER_CHECK(hf.has(scale_name), "FP8 tensor ", src.name, " has no ", scale_name, " in ", hf.dir());
  RINFER_CHECK(cfg.family.contains("fp8_weight_block"), "FP8 tensor ", src.name,
               " but config.json has no quantization_config with weight_block_size");
  const int64_t br = cfg.family["fp8_weight_block"][0].get<int64_t>(), bc = cfg.family["fp8_weight_block"][1].get<int64_t>();
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const Shape scale_shape{(rows + br - 1) / br, (cols + bc - 1) / bc};
  TensorView sc = hf.get(scale_name);
  RINFER_CHECK(sc.shape == scale_shape, "tensor ", scale_name, " has shape ", shape_str(sc.shape), ", expected ",
               shape_str(scale_shape), " for ", br, "x", bc, " blocks");
  std::vector<float> scales(size_t(numel(scale_shape)));
  convert_to_f32(sc.dtype, sc.data, scales.data(), scales.size());
  for (int64_t r = row0; r < row1; ++r) {
    const int64_t src_row = src.row_offset + r;
    float* d = dst + (r - row0) * row_len;
    for (int64_t c = 0; c < cols; ++c) d[c] *= scales[size_t((src_row / br) * scale_shape[1] + c / bc)];
  }
}

}  // namespace rinfer

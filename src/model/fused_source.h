#pragma once
// Reading rinfer tensors that are slices of fused HF tensors (W_pack,
// query_key_value, dense_h_to_4h) or renamed ones: a family maps each rinfer
// tensor to rows [row_offset, row_offset + rows) of an HF tensor whose full
// shape it states, and this does the checked read.
#include <functional>
#include <string>
#include <vector>

#include "model/architecture.h"

namespace rinfer {

struct HfSource {
  std::string name;     // HF tensor name
  Shape full_shape;     // its expected shape
  int64_t row_offset = 0;
};

// The HF-side tensor list of a family whose rinfer tensors are all slices or
// renames of HF tensors: each HF tensor once, with its full shape.
std::vector<TensorSpec> hf_specs_from_sources(const std::vector<TensorSpec>& specs,
                                              const std::function<HfSource(const std::string&)>& source);

// Rows [row0, row1) of `spec`, taken from src starting at src.row_offset, as
// f32. FP8 (e4m3) tensors are dequantized with their "<name>_scale_inv"
// block scales (DeepSeek-V3 layout; block size from cfg.family
// "fp8_weight_block", set from quantization_config).
void read_rows_from(const ModelConfig& cfg, const io::SafetensorsCheckpoint& hf, const TensorSpec& spec,
                    const HfSource& src, int64_t row0, int64_t row1, float* dst);

}  // namespace rinfer

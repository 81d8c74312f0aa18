#include "model/fused_source.h"

#include "core/error.h"
#include "io/safetensors.h"

namespace rinfer {

void read_rows_from(const io::SafetensorsCheckpoint& hf, const TensorSpec& spec, const HfSource& src, int64_t row0,
                    int64_t row1, float* dst) {
  TensorView t = hf.get(src.name);
  RINFER_CHECK(t.shape == src.full_shape, "tensor ", src.name, " has shape ", shape_str(t.shape), ", expected ",
               shape_str(src.full_shape), " in ", hf.dir());
  RINFER_CHECK(t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16 || t.dtype == DType::F64,
               "tensor ", src.name, " is stored as ", dtype_name(t.dtype),
               "; rinfer reads F32, F16, BF16 and F64 weights");
  const int64_t row_len = spec.shape.size() > 1 ? numel(spec.shape) / spec.shape[0] : 1;
  RINFER_ASSERT(src.row_offset + row1 <= (t.shape.empty() ? 1 : t.shape[0]));
  const size_t esz = dtype_size(t.dtype);
  convert_to_f32(t.dtype, t.as<uint8_t>() + size_t((src.row_offset + row0) * row_len) * esz, dst,
                 size_t((row1 - row0) * row_len));
}

}  // namespace rinfer

#pragma once
// MatrixDesc: a weight matrix W[N][K] (y = x W^T) in one of the layouts the
// backends multiply by, as a plain descriptor of bytes someone else owns.
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "core/quantized_weight.h"

namespace rinfer {

enum class MatrixFormat : uint8_t {
  Dense,        // row-major [N][K] of F32, F16 or BF16
  BlockedBf16,  // BF16 in 8 x 32 tiles, [N/8][K/32][8][32] (decode streams it as one run)
  Quantized,    // Q8 / Q4 group-wise (core/quantized_weight.h)
};

struct MatrixDesc {
  MatrixFormat format = MatrixFormat::Dense;
  Device device = Device::Cpu;
  DType dtype = DType::F32;  // Dense: F32/F16/BF16; BlockedBf16: BF16; Quantized: U8
  const void* data = nullptr;
  int64_t N = 0, K = 0;
  QuantizedWeight q;  // Quantized only

  bool empty() const { return data == nullptr; }
};

}  // namespace rinfer

namespace rinfer::ops {

// Rows [r0, r1) of w as a view of the same bytes: r0 and r1 on the layout's
// row unit (matrix_row_unit), or r1 = w.N. No copy, so a shard of a mapped
// file reads only its pages.
MatrixDesc matrix_rows(const MatrixDesc& w, int64_t r0, int64_t r1);
// Columns [k0, k1) of w copied into `out` (matrix_columns_bytes), in w's
// layout, quantized matrices with their scales interleaved (the layout the
// decode GEMVs stream fastest): k0 and k1 on the layout's column unit
// (matrix_column_unit).
size_t matrix_columns_bytes(const MatrixDesc& w, int64_t k0, int64_t k1);
MatrixDesc matrix_columns(const MatrixDesc& w, int64_t k0, int64_t k1, void* out);
// All of w copied into `out` (matrix_copy_bytes), quantized matrices with
// their scales interleaved: a shard's rows out of a mapped file, into
// memory the kernels read as fast as a model loaded whole.
size_t matrix_copy_bytes(const MatrixDesc& w);
MatrixDesc matrix_copy(const MatrixDesc& w, void* out);
// The units shards are cut on: 1 (dense), 8 rows / 32 columns (blocked
// BF16), 16 rows / group_size columns (quantized).
int64_t matrix_row_unit(const MatrixDesc& w);
int64_t matrix_column_unit(const MatrixDesc& w);

}  // namespace rinfer::ops

// Shards of a weight matrix in each stored layout (ops/matrix.h).
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_layout.h"
#include "ops/matrix.h"

namespace rinfer::ops {

int64_t matrix_row_unit(const MatrixDesc& w) {
  switch (w.format) {
    case MatrixFormat::Dense:
      return 1;
    case MatrixFormat::BlockedBf16:
      return 8;
    case MatrixFormat::Quantized:
      return 16;
  }
  return 1;
}

int64_t matrix_column_unit(const MatrixDesc& w) {
  switch (w.format) {
    case MatrixFormat::Dense:
      return 1;
    case MatrixFormat::BlockedBf16:
      return 32;
    case MatrixFormat::Quantized:
      return w.q.group_size;
  }
  return 1;
}

MatrixDesc matrix_rows(const MatrixDesc& w, int64_t r0, int64_t r1) {
  const int64_t unit = matrix_row_unit(w);
  RINFER_CHECK(0 <= r0 && r0 <= r1 && r1 <= w.N && r0 % unit == 0 && (r1 % unit == 0 || r1 == w.N),
               "rows [", r0, ", ", r1, ") of a ", w.N, "-row matrix are not on its ", unit, "-row blocks");
  MatrixDesc s = w;
  s.N = r1 - r0;
  const auto* d = static_cast<const uint8_t*>(w.data);
  switch (w.format) {
    case MatrixFormat::Dense:
      s.data = d + size_t(r0 * w.K) * dtype_size(w.dtype);
      break;
    case MatrixFormat::BlockedBf16:
      s.data = d + size_t(r0 * w.K) * 2;  // 8-row groups of K values follow one another
      break;
    case MatrixFormat::Quantized: {
      const kernels::cpu::QuantAddr a = kernels::cpu::quant_addr(w.q);
      const int64_t b0 = r0 / 16;
      s.q.N = s.N;
      if (w.q.interleaved) {
        s.q.data = static_cast<const uint8_t*>(w.q.data) + b0 * a.d_block;
      } else {
        s.q.data = static_cast<const uint8_t*>(w.q.data) + b0 * a.d_block;
        s.q.scales = static_cast<const uint8_t*>(w.q.scales) + b0 * a.s_block;
      }
      s.data = s.q.data;
      break;
    }
  }
  return s;
}

size_t matrix_columns_bytes(const MatrixDesc& w, int64_t k0, int64_t k1) {
  const int64_t k = k1 - k0;
  if (w.format != MatrixFormat::Quantized) return size_t(w.N * k) * dtype_size(w.dtype);
  return kernels::cpu::quant_interleaved_bytes(w.q.type, w.N, k, w.q.group_size, w.q.scale_dtype);
}

MatrixDesc matrix_columns(const MatrixDesc& w, int64_t k0, int64_t k1, void* out) {
  const int64_t unit = matrix_column_unit(w);
  RINFER_CHECK(0 <= k0 && k0 < k1 && k1 <= w.K && k0 % unit == 0 && k1 % unit == 0, "columns [", k0, ", ", k1,
               ") of a matrix of ", w.K, " columns are not on its ", unit, "-column units");
  const int64_t k = k1 - k0;
  MatrixDesc s = w;
  s.K = k;
  s.data = out;
  auto* o = static_cast<uint8_t*>(out);
  const auto* d = static_cast<const uint8_t*>(w.data);
  switch (w.format) {
    case MatrixFormat::Dense: {
      const size_t esz = dtype_size(w.dtype);
      for (int64_t n = 0; n < w.N; ++n) std::memcpy(o + size_t(n * k) * esz, d + size_t(n * w.K + k0) * esz, size_t(k) * esz);
      break;
    }
    case MatrixFormat::BlockedBf16:
      // Per 8-row group, the 8 x 32 tiles of the columns are one run.
      for (int64_t g = 0; g < w.N / 8; ++g)
        std::memcpy(o + size_t(g * k * 8) * 2, d + size_t(g * w.K * 8 + k0 * 8) * 2, size_t(k * 8) * 2);
      break;
    case MatrixFormat::Quantized: {
      const kernels::cpu::QuantAddr a = kernels::cpu::quant_addr(w.q);
      const int64_t G = k / w.q.group_size, g0 = k0 / w.q.group_size, blocks = kernels::cpu::quant_padded_rows(w.N) / 16;
      const int64_t D = kernels::cpu::quant_group_data_bytes(w.q), S = kernels::cpu::quant_group_scale_bytes(w.q);
      // The columns in the separate layout first (a block's groups one
      // after another), then interleaved into `out`.
      std::vector<uint8_t> separate(kernels::cpu::quant_data_bytes(w.q.type, w.N, k) +
                                    kernels::cpu::quant_scale_bytes(w.N, k, w.q.group_size, w.q.scale_dtype));
      uint8_t* data = separate.data();
      uint8_t* scales = data + kernels::cpu::quant_data_bytes(w.q.type, w.N, k);
      for (int64_t b = 0; b < blocks; ++b)
        for (int64_t g = 0; g < G; ++g) {
          std::memcpy(data + (b * G + g) * D, a.group_data(b, g0 + g), size_t(D));
          std::memcpy(scales + (b * G + g) * S, a.group_scales(b, g0 + g), size_t(S));
        }
      s.q.K = k;
      s.q.data = data;
      s.q.scales = scales;
      s.q.interleaved = false;
      s.q = kernels::cpu::interleave_quant_scales(s.q, o);
      s.data = s.q.data;
      break;
    }
  }
  return s;
}

size_t matrix_copy_bytes(const MatrixDesc& w) {
  if (w.format != MatrixFormat::Quantized) return size_t(w.N * w.K) * dtype_size(w.dtype);
  return kernels::cpu::quant_interleaved_bytes(w.q.type, w.N, w.K, w.q.group_size, w.q.scale_dtype);
}

MatrixDesc matrix_copy(const MatrixDesc& w, void* out) {
  MatrixDesc s = w;
  if (w.format != MatrixFormat::Quantized) {
    std::memcpy(out, w.data, matrix_copy_bytes(w));
    s.data = out;
    return s;
  }
  if (w.q.interleaved) {
    std::memcpy(out, w.q.data, matrix_copy_bytes(w));
    s.q.data = out;
  } else {
    s.q = kernels::cpu::interleave_quant_scales(w.q, out);
  }
  s.data = s.q.data;
  return s;
}

}  // namespace rinfer::ops

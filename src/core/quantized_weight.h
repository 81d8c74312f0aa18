#pragma once
// A quantized weight matrix as the kernels read it: a plain descriptor of
// bytes someone else owns (the weight store, a layer's shard).
//
// Symmetric per-group quantization of W[N][K] (y = x W^T): every run of
// group_size consecutive k of a row shares one scale s, and
//   W[n, k] ~= s[n, k / group_size] * q[n, k],
//   q in [-127, 127] (Q8, s = max|w| / 127) or [-7, 7] (Q4, s = max|w| / 7).
//
// Packed layout: rows are taken in blocks of 16 (N is padded to
// Np = round_up(N, 16); the padding rows have q = 0 and scale 0). q is stored
// unsigned, u = q + offset with offset 128 (Q8) or 8 (Q4).
//  - Q8 data: [Np/16][K/4][16 rows][4 k] bytes (one 64-byte line = 16 rows x
//    4 consecutive k: one VNNI operand).
//  - Q4 data: [Np/16][K/8][16 rows][4 k] bytes of two nibbles, low nibble for
//    k % 8 < 4, high nibble for k % 8 >= 4.
//  - scales: [Np/16][K/group_size][16 rows] of scale_dtype (F16 or F32).
// Interleaved variant: the scales live inside `data`, each 16-row block a run
// of chunks, one 64-byte line of the scales of the next groups followed by
// those groups' data lines, so that a decode GEMV streams one run per block
// (kernels/cpu/quant_layout.h addresses both layouts).
#include <cstdint>

#include "core/dtype.h"

namespace rinfer {

enum class QuantType : uint8_t { Q8, Q4 };

struct QuantizedWeight {
  QuantType type = QuantType::Q8;
  int64_t N = 0, K = 0;
  int64_t group_size = 32;
  DType scale_dtype = DType::F16;  // F16 or F32
  const void* data = nullptr;      // the packed data (interleaved: data and scales)
  const void* scales = nullptr;    // unused when interleaved
  bool interleaved = false;
  // Reserved for asymmetric (GPTQ/AWQ-style) per-group zero points, indexed
  // as scales. Must be nullptr for now: the zero point is the fixed offset.
  const void* zeros = nullptr;
};

}  // namespace rinfer

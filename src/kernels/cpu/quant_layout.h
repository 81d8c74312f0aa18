#pragma once
// Where group g of 16-row block b of a packed quantized weight
// (QuantizedWeight, ops.h) has its data lines and its 16 row scales, in
// either layout:
//  - separate: the data of every block, then (QuantizedWeight::scales) the
//    scales of every block;
//  - interleaved (QuantizedWeight::interleaved): each block is a run of
//    chunks, one 64-byte line of scales for the next groups followed by
//    those groups' data, so that a GEMV streaming a block reads one run of
//    lines instead of two.
// Every quantized kernel reads a weight through this, so that both layouts
// give the same bits.
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu {

// Bytes of one group's data in a 16-row block: 16 rows x group_size k.
inline int64_t quant_group_data_bytes(const QuantizedWeight& w) {
  return (w.type == QuantType::Q8 ? 16 : 8) * w.group_size;
}
// Bytes of one group's 16 scales: 32 (F16) or 64 (F32).
inline int64_t quant_group_scale_bytes(const QuantizedWeight& w) { return w.scale_dtype == DType::F16 ? 32 : 64; }

struct QuantAddr {
  const uint8_t* data;    // block 0, group 0
  const uint8_t* scales;  // block 0, group 0
  int64_t d_block, s_block;  // bytes from one block to the next
  int64_t d_chunk, s_chunk;  // bytes from one chunk (1 << shift groups) to the next
  int64_t d_unit, s_unit;    // bytes from one group to the next inside a chunk
  int shift;                 // log2 of the groups per chunk (0 or 1)
  bool interleaved;          // the layout (separate: false)

  const uint8_t* group_data(int64_t b, int64_t g) const {
    return data + b * d_block + (g >> shift) * d_chunk + (g & ((int64_t(1) << shift) - 1)) * d_unit;
  }
  const uint8_t* group_scales(int64_t b, int64_t g) const {
    return scales + b * s_block + (g >> shift) * s_chunk + (g & ((int64_t(1) << shift) - 1)) * s_unit;
  }
  // Whether group g is the last group of a chunk in the interleaved layout
  // (or of the block, whose next block starts with a chunk). A decode GEMV
  // prefetches each data line a fixed distance ahead, one prefetch per data
  // line; a chunk also holds a scales line, so its lines outnumber its
  // prefetches by one and the targets fall one line behind per chunk: one
  // line of every chunk's worth is never prefetched and is read by a demand
  // miss. The GEMVs prefetch one line more at the last data line of such a
  // group (the test Quant.DecodePrefetchReachesEveryLine walks the rule).
  bool chunk_end(int64_t g, int64_t n_groups) const {
    return interleaved && (((g + 1) & ((int64_t(1) << shift) - 1)) == 0 || g + 1 == n_groups);
  }
};

inline QuantAddr quant_addr(const QuantizedWeight& w) {
  const int64_t G = w.K / w.group_size, D = quant_group_data_bytes(w), S = quant_group_scale_bytes(w);
  const auto* d = static_cast<const uint8_t*>(w.data);
  if (!w.interleaved) return {d, static_cast<const uint8_t*>(w.scales), G * D, G * S, D, S, 0, 0, 0, false};
  const int shift = S == 32 ? 1 : 0;                  // groups whose scales share one line
  const int64_t chunk = 64 + (int64_t(1) << shift) * D;
  const int64_t block = ((G + (1 << shift) - 1) >> shift) * 64 + G * D;
  return {d + 64, d, block, block, chunk, chunk, D, S, shift, true};
}

// Bytes a GEMV reads per 16-row block, data and scales, in w's layout
// (what the decode GEMVs size their claims of blocks by).
inline int64_t quant_block_read_bytes(const QuantizedWeight& w) {
  const QuantAddr a = quant_addr(w);
  return w.interleaved ? a.d_block : a.d_block + a.s_block;
}

}  // namespace rinfer::kernels::cpu

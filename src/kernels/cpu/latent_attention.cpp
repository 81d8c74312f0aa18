// Scalar implementation (the compiler vectorizes the inner loops for the
// baseline ISA); a SIMD variant belongs next to the other attention kernels.
#include "kernels/cpu/latent_attention.h"

#include <vector>

#include "core/error.h"

namespace rinfer::kernels::cpu {

namespace {
// Convert one cache row to f32 (rows are short: a few hundred values).
void load_row(const PagedKV& kv, int64_t slot, float* dst) {
  const size_t esz = dtype_size(kv.dtype);
  convert_to_f32(kv.dtype, static_cast<const uint8_t*>(kv.k) + size_t(slot) * size_t(kv.head_dim) * esz, dst,
                 size_t(kv.head_dim));
}
}  // namespace

void latent_attention_head(const float* q, const PagedKV& kv, const int32_t* block_table, int64_t n_ctx,
                           int latent_dim, float scale, float* out, float* scratch) {
  const int D = kv.head_dim;
  thread_local std::vector<float> row;
  row.resize(size_t(D));
  for (int64_t j = 0; j < n_ctx; ++j) {
    const int64_t slot = int64_t(block_table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
    load_row(kv, slot, row.data());
    float dot = 0;
    for (int d = 0; d < D; ++d) dot += q[d] * row[size_t(d)];
    scratch[j] = dot * scale;
  }
  softmax(scratch, n_ctx);
  for (int d = 0; d < latent_dim; ++d) out[d] = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    const int64_t slot = int64_t(block_table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
    load_row(kv, slot, row.data());
    const float p = scratch[j];
    for (int d = 0; d < latent_dim; ++d) out[d] += p * row[size_t(d)];
  }
}

void store_latent(const PagedKV& kv, int64_t slot, const float* row) {
  RINFER_ASSERT(kv.n_kv_heads == 1);
  const size_t esz = dtype_size(kv.dtype);
  convert_from_f32(kv.dtype, row, static_cast<uint8_t*>(kv.k) + size_t(slot) * size_t(kv.head_dim) * esz,
                   size_t(kv.head_dim));
}

}  // namespace rinfer::kernels::cpu

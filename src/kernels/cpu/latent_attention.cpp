// Built on the dispatched kernels (matmul for the scores, axpy for the
// weighted sum), so it runs at the active ISA's width.
#include "kernels/cpu/latent_attention.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/impl.h"

namespace rinfer::kernels::cpu {

void latent_attention_heads(const float* q, int n_heads, const PagedKV& kv, const int32_t* block_table,
                            int64_t n_ctx, int latent_dim, float scale, float* out, float* scratch) {
  const int D = kv.head_dim;
  const int64_t bs = kv.block_size;
  const size_t esz = dtype_size(kv.dtype);
  float* scores = scratch;  // [n_heads][n_ctx]
  float* rows = scratch + int64_t(n_heads) * n_ctx;  // one cache block in f32
  auto block = [&](int64_t j0) {
    return static_cast<const uint8_t*>(kv.k) + size_t(block_table[j0 / bs]) * size_t(bs * D) * esz;
  };
  // Scores a block at a time: the block's rows are a small matrix, so the
  // matmul kernels do the products (every head against every row) in SIMD.
  const bool as_matrix = kv.dtype == DType::F32 || kv.dtype == DType::BF16 || kv.dtype == DType::F16;
  for (int64_t j0 = 0; j0 < n_ctx; j0 += bs) {
    const int64_t nb = std::min(bs, n_ctx - j0);
    if (as_matrix) {
      detail::matmul_f32_x(q, n_heads, D, D, block(j0), kv.dtype, nb, scores + j0, n_ctx);
      continue;
    }
    convert_to_f32(kv.dtype, block(j0), rows, size_t(nb * D));
    for (int h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < nb; ++i) {
        float dot = 0;
        for (int d = 0; d < D; ++d) dot += q[h * D + d] * rows[i * D + d];
        scores[h * n_ctx + j0 + i] = dot;
      }
  }
  for (int h = 0; h < n_heads; ++h) {
    float* sc = scores + h * n_ctx;
    for (int64_t j = 0; j < n_ctx; ++j) sc[j] *= scale;
    softmax(sc, n_ctx);
  }
  for (int64_t i = 0; i < int64_t(n_heads) * latent_dim; ++i) out[i] = 0;
  for (int64_t j0 = 0; j0 < n_ctx; j0 += bs) {
    const int64_t nb = std::min(bs, n_ctx - j0);
    convert_to_f32(kv.dtype, block(j0), rows, size_t(nb * D));
    for (int h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < nb; ++i) axpy(out + int64_t(h) * latent_dim, scores[h * n_ctx + j0 + i], rows + i * D,
                                           latent_dim);
  }
}

void store_latent(const PagedKV& kv, int64_t slot, const float* row) {
  RINFER_ASSERT(kv.n_kv_heads == 1);
  const size_t esz = dtype_size(kv.dtype);
  convert_from_f32(kv.dtype, row, static_cast<uint8_t*>(kv.k) + size_t(slot) * size_t(kv.head_dim) * esz,
                   size_t(kv.head_dim));
}

}  // namespace rinfer::kernels::cpu

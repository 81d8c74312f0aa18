#pragma once
// Building blocks that model files compose: each holds its weights (views
// into the WeightStore) and calls kernels; none does SIMD itself.
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace rinfer {

// y[rows, out] = x[rows, in] W^T + b
// The weight is either a float TensorView [out, in] (F32/F16/BF16), a BF16
// one stored blocked ([out/8, in/32, 8, 32], blocked == true), or a
// quantized Q8/Q4 matrix (quantized == true): then `qweight` is the view the
// kernels use, as the loader registered it (WeightStore::quantized), and
// `weight` its U8 data tensor (so weight.data is still non-null).
struct Linear {
  TensorView weight;            // [out, in], or the packed data when quantized
  kernels::cpu::QuantizedWeight qweight;
  bool quantized = false;
  // BF16 stored blocked ([out/8, in/32, 8, 32], kernels/cpu/ops.h
  // matmul_bf16_blocked), as the converter writes projection matrices.
  bool blocked = false;
  const float* bias = nullptr;  // [out] or null
  int64_t in = 0, out = 0;

  static Linear load(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias);
  void forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const {
    if (quantized)
      kernels::cpu::matmul_q(x, rows, in, in, qweight, bias, y, out, pool);
    else if (blocked)
      kernels::cpu::matmul_bf16_blocked(x, rows, in, in, static_cast<const uint16_t*>(weight.data), out, bias, y, out,
                                        pool);
    else
      kernels::cpu::matmul(x, rows, in, in, weight.data, weight.dtype, out, bias, y, out, pool);
  }
  // Bytes a forward pass reads: data + scales when quantized.
  uint64_t bytes() const { return quantized ? kernels::cpu::quant_weight_bytes(qweight) : weight.nbytes(); }
};

// Several Linears of one input (a layer's q/k/v, gate/up): outs[i] = x
// W_i^T + b_i. When all are quantized they go to matmul_q_multi (at decode:
// x quantized once, one pool job), when all are blocked BF16 to
// matmul_bf16_blocked_multi (likewise); otherwise one forward each.
void forward_linears(const float* x, int64_t rows, std::initializer_list<std::pair<const Linear*, float*>> linears,
                     ThreadPool& pool);

// Row-wise work of a batch (norms, residual adds, silu * up, RoPE): f(r0, r1)
// for rows [r0, r1). A prompt's rows are split over the pool (on one thread
// these ops were ~4 % of a 2-thread qwen2.5-0.5b prefill's samples, with the
// other thread idle meanwhile); a decode step's few rows are not worth a
// dispatch and stay on the calling thread.
constexpr int64_t kParallelMinRows = 16;
template <typename F>
void for_rows(ThreadPool& pool, int64_t rows, F&& f) {
  if (rows < kParallelMinRows || pool.size() == 1) {
    f(int64_t(0), rows);
    return;
  }
  pool.parallel_for(rows, 1, [&](int64_t r0, int64_t r1, int) { f(r0, r1); });
}

struct RMSNorm {
  const float* weight = nullptr;
  int64_t dim = 0;
  float eps = 1e-6f;

  static RMSNorm load(const WeightStore& w, const std::string& name, int64_t dim, double eps);
  void forward(const float* x, int64_t rows, float* y) const {
    for (int64_t r = 0; r < rows; ++r) kernels::cpu::rmsnorm(x + r * dim, weight, dim, eps, y + r * dim);
  }
  void forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const {
    for_rows(pool, rows, [&](int64_t r0, int64_t r1) { forward(x + r0 * dim, r1 - r0, y + r0 * dim); });
  }
};

// Rotary position embedding with the HF rope_scaling variants.
class RotaryEmbedding {
 public:
  RotaryEmbedding() = default;
  RotaryEmbedding(const ModelConfig& cfg, int64_t rot_dim, kernels::cpu::RopeStyle style);
  // Rotate n_heads heads (stride head_dim) of one token at `pos`; seq_len is
  // the sequence length seen so far (only "dynamic" scaling depends on it).
  void apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, int64_t seq_len) const;
  // apply() in two steps, for vectors that share a position (a token's q
  // and k in every layer): angles() writes the cos and sin of the angles at
  // pos (rot_dim() floats, kernels::cpu::rope_angles), apply_angles()
  // rotates with them, apply()'s values bit for bit. libm's cos and sin
  // were most of a prompt's rope stage when every layer took them again.
  void angles(int64_t pos, int64_t seq_len, float* cs) const;
  void apply_angles(float* x, int64_t n_heads, int64_t head_dim, const float* cs) const;
  int64_t rot_dim() const { return rot_dim_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

 private:
  std::vector<float> inv_freq_;
  int64_t rot_dim_ = 0;
  kernels::cpu::RopeStyle style_ = kernels::cpu::RopeStyle::RotateHalf;
  double theta_ = 10000.0;
  RopeScaling scaling_;
  int64_t max_pos_ = 0;
  float mscale_ = 1.0f;  // multiplies cos and sin (YaRN)
};

// Inverse frequencies 1 / theta^(2i/d), i < rot_dim/2, with linear / llama3
// scaling applied (dynamic NTK is applied per sequence length in apply()).
std::vector<float> rope_inv_freq(double theta, int64_t rot_dim, const RopeScaling& scaling);

}  // namespace rinfer

#pragma once
// Building blocks that model files compose: each holds its weights (views
// into the WeightStore) and calls kernels; none does SIMD itself.
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace rinfer {

// y[rows, out] = x[rows, in] W^T + b
struct Linear {
  TensorView weight;            // [out, in]
  const float* bias = nullptr;  // [out] or null
  int64_t in = 0, out = 0;

  static Linear load(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias);
  void forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const {
    kernels::cpu::matmul(x, rows, in, in, weight.data, weight.dtype, out, bias, y, out, pool);
  }
  uint64_t bytes() const { return weight.nbytes(); }
};

struct RMSNorm {
  const float* weight = nullptr;
  int64_t dim = 0;
  float eps = 1e-6f;

  static RMSNorm load(const WeightStore& w, const std::string& name, int64_t dim, double eps);
  void forward(const float* x, int64_t rows, float* y) const {
    for (int64_t r = 0; r < rows; ++r) kernels::cpu::rmsnorm(x + r * dim, weight, dim, eps, y + r * dim);
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

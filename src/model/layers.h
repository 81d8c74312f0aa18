#pragma once
// Building blocks that model files compose: each holds its weights (views
// into the WeightStore, or its shard of them) and calls ops; none does SIMD
// itself or knows the device.
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <memory>

#include "core/rope_style.h"
#include "core/tensor.h"
#include "model/forward_context.h"
#include "model/model_config.h"
#include "model/shard.h"
#include "model/weights.h"
#include "ops/matrix.h"
#include "ops/ops.h"

namespace rinfer {

// How a Linear holds its matrix when the model is split over ranks:
//  Replicated: all of it, on every rank.
//  Column:     a range of output rows (the rank's heads, its part of the
//              MLP's width, its part of the vocabulary); y is that part of
//              the output, and the next layer takes it as its input shard.
//  Row:        a range of input columns, those of the column-parallel layer
//              before it; each rank's product is a partial sum, reduced
//              over the ranks (ctx.comm), the bias added once after.
// In a world of one every mode is the whole matrix, computed as before.
enum class ParallelMode : uint8_t { Replicated, Column, Row };
const char* parallel_mode_name(ParallelMode m);

// y[rows, out] = x[rows, in] W^T + b, in the matrix's stored layout (dense,
// blocked BF16 or quantized: ops/matrix.h), for the rank's shard.
class Linear {
 public:
  Linear() = default;
  // The matrix prefix.weight [out, in] (and prefix.bias when bias), or the
  // shard's part of it: Column takes shard_range(out, shard, align) of the
  // rows, Row shard_range(in, shard, align) of the columns, align being the
  // layout's unit (16-row blocks, quantization groups, 32-column tiles) and
  // unit_multiple: what the caller's parts must stay whole (a head's width).
  static Linear load(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias,
                     ParallelMode mode = ParallelMode::Replicated, const Shard& shard = {}, int64_t unit = 1);
  // Exactly output rows [rows.begin, rows.end) (a Column shard whose range
  // the caller chose, e.g. the K/V head a rank shares with others).
  static Linear load_rows(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias,
                          Range rows);
  // Exactly input columns [cols.begin, cols.end), reduced over the ranks.
  static Linear load_columns(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias,
                             Range cols, const Shard& shard);
  // A Linear over a matrix someone else holds (tied embeddings).
  static Linear over(const MatrixDesc& m, ParallelMode mode = ParallelMode::Replicated, Range rows = {});

  // Holds its matrix in a private copy (quantized: scales interleaved), no
  // longer a view of someone else's bytes: a shard of a mapped file then
  // decodes as fast as a model loaded whole. The matrix being rows of the
  // tensor `name` in w, the pages copied are handed back as the copy goes.
  void own_copy(const WeightStore& w, const std::string& name);

  void forward(const ForwardContext& ctx, const float* x, int64_t rows, float* y) const;
  // forward() without a reducing Linear's all-reduce: this rank's partial
  // sum, the bias on rank 0 only, so that the ranks' sums add it once. For
  // blocks that add several row-parallel products (a MoE layer's experts,
  // weighted) and reduce their total once; others are forward() itself.
  void forward_partial(const ForwardContext& ctx, const float* x, int64_t rows, float* y) const;

  int64_t in() const { return w_.K; }    // this shard's input width
  int64_t out() const { return w_.N; }   // this shard's output width
  Range rows() const { return rows_; }   // of the whole matrix's outputs
  Range cols() const { return cols_; }   // of the whole matrix's inputs
  ParallelMode mode() const { return mode_; }
  bool reduces() const { return mode_ == ParallelMode::Row && world_ > 1; }
  const MatrixDesc& matrix() const { return w_; }
  const float* bias() const { return bias_; }
  bool empty() const { return w_.empty(); }
  uint64_t bytes() const { return ops::matrix_bytes(w_); }  // what a pass reads: data + scales

 private:
  MatrixDesc w_;
  const float* bias_ = nullptr;
  ParallelMode mode_ = ParallelMode::Replicated;
  int world_ = 1, rank_ = 0;
  Range rows_, cols_;
  std::shared_ptr<const void> owned_;  // a shard's copy of its rows or columns
};

// Several Linears of one input (a layer's q/k/v, gate/up), none of them
// reducing: outs[i] = x W_i^T + b_i, as one job where the backend can.
void forward_linears(const ForwardContext& ctx, const float* x, int64_t rows,
                     std::initializer_list<std::pair<const Linear*, float*>> linears);

struct RMSNorm {
  const float* weight = nullptr;
  int64_t dim = 0;
  float eps = 1e-6f;

  static RMSNorm load(const WeightStore& w, const std::string& name, int64_t dim, double eps);
  void forward(const float* x, int64_t rows, float* y) const {
    for (int64_t r = 0; r < rows; ++r) ops::rmsnorm(x + r * dim, weight, dim, eps, y + r * dim);
  }
  void forward(const ExecContext& exec, const float* x, int64_t rows, float* y) const {
    for_rows(exec, rows, [&](int64_t r0, int64_t r1) { forward(x + r0 * dim, r1 - r0, y + r0 * dim); });
  }
};

// Rotary position embedding with the HF rope_scaling variants.
class RotaryEmbedding {
 public:
  RotaryEmbedding() = default;
  RotaryEmbedding(const ModelConfig& cfg, int64_t rot_dim, RopeStyle style);
  // Rotate n_heads heads (stride head_dim) of one token at `pos`; seq_len is
  // the sequence length seen so far (only "dynamic" scaling depends on it).
  void apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, int64_t seq_len) const;
  // apply() in two steps, for vectors that share a position (a token's q
  // and k in every layer): angles() writes the cos and sin of the angles at
  // pos (rot_dim() floats, ops::rope_angles), apply_angles()
  // rotates with them, apply()'s values bit for bit. libm's cos and sin
  // were most of a prompt's rope stage when every layer took them again.
  void angles(int64_t pos, int64_t seq_len, float* cs) const;
  void apply_angles(float* x, int64_t n_heads, int64_t head_dim, const float* cs) const;
  int64_t rot_dim() const { return rot_dim_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

 private:
  std::vector<float> inv_freq_;
  int64_t rot_dim_ = 0;
  RopeStyle style_ = RopeStyle::RotateHalf;
  double theta_ = 10000.0;
  RopeScaling scaling_;
  int64_t max_pos_ = 0;
  float mscale_ = 1.0f;  // multiplies cos and sin (YaRN)
};

// Inverse frequencies 1 / theta^(2i/d), i < rot_dim/2, with linear / llama3
// scaling applied (dynamic NTK is applied per sequence length in apply()).
std::vector<float> rope_inv_freq(double theta, int64_t rot_dim, const RopeScaling& scaling);

}  // namespace rinfer

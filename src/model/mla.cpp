#include "model/mla.h"

#include <cstring>
#include <optional>

#include "core/error.h"
#include "model/stage_profile.h"

namespace rinfer {

MlaAttention::MlaAttention(const MlaShape& s, const WeightStore& w, const std::string& p, double eps,
                           std::shared_ptr<const RotaryEmbedding> rope, float softmax_scale, const Shard& shard)
    : s_(s), rope_(std::move(rope)), scale_(softmax_scale) {
  const int64_t qk = s.nope_dim + s.rope_dim, NH = s.n_heads, W = shard.world;
  RINFER_CHECK(NH % W == 0, "tensor parallelism: ", NH, " attention heads do not split over ", W, " ranks");
  n_heads_ = NH / W;
  const int64_t h0 = shard.rank * n_heads_, h1 = h0 + n_heads_;
  const Range q_rows{h0 * qk, h1 * qk};
  if (s.q_lora_rank > 0) {
    q_a_ = Linear::load(w, p + "q_a_proj", s.hidden, s.q_lora_rank, false);
    q_a_norm_ = RMSNorm::load(w, p + "q_a_layernorm.weight", s.q_lora_rank, eps);
    q_b_ = Linear::load_rows(w, p + "q_b_proj", s.q_lora_rank, NH * qk, false, q_rows);
  } else {
    q_proj_ = Linear::load_rows(w, p + "q_proj", s.hidden, NH * qk, false, q_rows);
  }
  kv_a_ = Linear::load(w, p + "kv_a_proj_with_mqa", s.hidden, s.kv_lora_rank + s.rope_dim, false);
  kv_a_norm_ = RMSNorm::load(w, p + "kv_a_layernorm.weight", s.kv_lora_rank, eps);
  kv_b_ = Linear::load_rows(w, p + "kv_b_proj", s.kv_lora_rank, NH * (s.nope_dim + s.v_dim), false,
                            {h0 * (s.nope_dim + s.v_dim), h1 * (s.nope_dim + s.v_dim)});
  if (shard.whole()) {
    o_ = Linear::load(w, p + "o_proj", NH * s.v_dim, s.hidden, false);
  } else {
    // o_proj's columns are cut at the heads: they must end on its layout's
    // units (quantization groups, 32-column tiles).
    const int64_t unit = ops::matrix_column_unit(Linear::load(w, p + "o_proj", NH * s.v_dim, s.hidden, false).matrix());
    RINFER_CHECK((n_heads_ * s.v_dim) % unit == 0, "tensor parallelism: ", n_heads_, " heads of ", s.v_dim,
                 " per rank are ", n_heads_ * s.v_dim, " columns of ", p, "o_proj, not a multiple of its ", unit,
                 "-column units (quantization groups: convert with a smaller --group-size)");
    o_ = Linear::load_columns(w, p + "o_proj", NH * s.v_dim, s.hidden, false, {h0 * s.v_dim, h1 * s.v_dim}, shard);
  }
  // The absorbed attention below reads kv_b's raw rows, so the converter keeps
  // kv_b_proj in the float dtype in quantized models (convert/converter.cpp).
  RINFER_CHECK(kv_b_.matrix().format == MatrixFormat::Dense, "tensor ", p,
               "kv_b_proj.weight is quantized or blocked; MLA needs it as a row-major float matrix (", w.source, ")");
  // Repack the K half of kv_b ([nope, latent] per head) transposed, so the
  // absorption q_lat = W_uk^T q_nope is a plain matmul with [latent, nope] rows.
  const DType dt = kv_b_.matrix().dtype;
  const size_t esz = dtype_size(dt);
  w_uk_t_ = Buffer(size_t(n_heads_ * s.kv_lora_rank * s.nope_dim) * esz);
  const auto* src = static_cast<const uint8_t*>(kv_b_.matrix().data);
  auto* dst = w_uk_t_.as<uint8_t>();
  for (int64_t h = 0; h < n_heads_; ++h)
    for (int64_t i = 0; i < s.nope_dim; ++i)
      for (int64_t c = 0; c < s.kv_lora_rank; ++c) {
        const size_t from = size_t((h * (s.nope_dim + s.v_dim) + i) * s.kv_lora_rank + c);
        const size_t to = size_t((h * s.kv_lora_rank + c) * s.nope_dim + i);
        std::memcpy(dst + to * esz, src + from * esz, esz);
      }
}

uint64_t MlaAttention::weight_bytes() const {
  return q_a_.bytes() + q_b_.bytes() + q_proj_.bytes() + kv_a_.bytes() + kv_b_.bytes() + o_.bytes();
}

namespace {

// The per-head products (a 128 KB matrix each): for a few rows, side by
// side on one thread each (their hand-offs to the threads would cost more
// than their bytes); for a prompt, one after another on all threads.
void per_head(const ForwardContext& ctx, int64_t T, std::span<const ops::MatmulJob> jobs) {
  if (T <= 8) return ops::matmul_batch(ctx.exec, T, jobs);
  for (const auto& j : jobs) ops::matmul(ctx.exec, j.x, T, j.ldx, j.w, nullptr, j.y, j.ldy);
}

}  // namespace

void MlaAttention::forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) {
  const int64_t T = ctx.tokens.n_tokens, NH = n_heads_, L = s_.kv_lora_rank, R = s_.rope_dim, N = s_.nope_dim,
                V = s_.v_dim, QK = N + R, ROW = L + R;
  Workspace& ws = *ctx.ws;
  float* q = ws.get(Workspace::kQ, size_t(T * NH * QK));
  float* kv = ws.get(Workspace::kK, size_t(T * ROW));
  float* qlat = ws.get(Workspace::kMla1, size_t(T * NH * ROW));  // [c-space query | rope query] per head
  float* olat = ws.get(Workspace::kMla2, size_t(T * NH * L));
  float* attn = ws.get(Workspace::kAttn, size_t(T * NH * V));
  const DType dt = kv_b_.matrix().dtype;
  const size_t esz = dtype_size(dt);
  // The absorbed q reads W_uk (NH x L x N), the expansion W_uv (NH x V x L).
  const uint64_t uk_bytes = uint64_t(NH * L * N) * esz, uv_bytes = uint64_t(NH * V * L) * esz;
  std::optional<profile::Scope> scope(std::in_place, profile::Stage::Qkv,
                                      [&] { return q_a_.bytes() + q_b_.bytes() + q_proj_.bytes() + kv_a_.bytes(); });
  if (s_.q_lora_rank > 0) {
    float* qa = ws.get(Workspace::kMla0, size_t(T * s_.q_lora_rank));
    q_a_.forward(ctx, h, T, qa);
    q_a_norm_.forward(qa, T, qa);
    q_b_.forward(ctx, qa, T, q);
  } else {
    q_proj_.forward(ctx, h, T, q);
  }
  kv_a_.forward(ctx, h, T, kv);
  const PagedKV& pkv = ctx.kv->layers[size_t(layer)];
  RINFER_ASSERT(pkv.head_dim == ROW && pkv.n_kv_heads == 1);
  const int64_t bs = ctx.kv->block_size;
  scope.emplace(profile::Stage::AttnPrep);
  const float* angles = token_angles(ctx, *rope_);
  for (int64_t t = 0; t < T; ++t) {
    const BatchItem& item = ctx.batch[size_t(ctx.tokens.seq[t])];
    const int64_t pos = ctx.tokens.pos[t];
    float* row = kv + t * ROW;
    kv_a_norm_.forward(row, 1, row);  // normalizes the latent part only (first L values)
    const float* a = angles + t * rope_->rot_dim();
    rope_->apply_angles(row + L, 1, R, a);
    for (int64_t hd = 0; hd < NH; ++hd) {
      float* qh = q + (t * NH + hd) * QK;
      rope_->apply_angles(qh + N, 1, R, a);
      std::memcpy(qlat + (t * NH + hd) * ROW + L, qh + N, size_t(R) * sizeof(float));
    }
    const int64_t slot = int64_t(item.block_table[size_t(pos / bs)]) * bs + pos % bs;
    ops::store_latent(pkv, slot, row);
  }
  // Absorb: q_lat[t, h] = W_uk[h]^T q_nope[t, h], one matmul per head over all tokens.
  scope.emplace(profile::Stage::Qkv, uk_bytes);
  std::vector<ops::MatmulJob>& jobs = head_jobs_;
  jobs.clear();
  for (int64_t hd = 0; hd < NH; ++hd)
    jobs.push_back({q + hd * QK, NH * QK,
                    MatrixDesc{MatrixFormat::Dense, Device::Cpu, dt, w_uk_t_.as<uint8_t>() + size_t(hd * L * N) * esz,
                               L, N, {}},
                    qlat + hd * ROW, NH * ROW});
  per_head(ctx, T, jobs);
  scope.emplace(profile::Stage::Attention, [&] {
    uint64_t n = 0;
    for (const auto& item : ctx.batch)
      n += uint64_t(item.start_pos + int64_t(item.tokens.size())) * uint64_t(ROW) * dtype_size(pkv.dtype);
    return n;
  });
  ops::latent_attention(ctx.exec, ctx.tokens, qlat, NH, pkv, int(L), scale_, olat);
  // Expand: v[t, h] = W_uv[h] o_lat[t, h], W_uv[h] being rows of kv_b.
  scope.emplace(profile::Stage::AttnOut, [&] { return uv_bytes + o_.bytes(); });
  const auto* kv_b = static_cast<const uint8_t*>(kv_b_.matrix().data);
  jobs.clear();
  for (int64_t hd = 0; hd < NH; ++hd)
    jobs.push_back({olat + hd * L, NH * L,
                    MatrixDesc{MatrixFormat::Dense, Device::Cpu, dt, kv_b + size_t((hd * (N + V) + N) * L) * esz, V, L,
                               {}},
                    attn + hd * V, NH * V});
  per_head(ctx, T, jobs);
  o_.forward(ctx, attn, T, out);
}

}  // namespace rinfer

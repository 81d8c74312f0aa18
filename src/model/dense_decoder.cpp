#include "model/dense_decoder.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace rinfer {

namespace kc = kernels::cpu;

std::vector<TensorSpec> llama_tensor_specs(const ModelConfig& c, int64_t group) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t q_out = c.n_heads * D, kv_out = c.n_kv_heads * D;
  std::vector<TensorSpec> s;
  if (group == kGlobalGroup) {
    s.push_back({"model.embed_tokens.weight", {c.vocab_size, H}, TensorRole::Embedding});
    s.push_back({"model.norm.weight", {H}, TensorRole::Vector});
    if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, H}, TensorRole::Matrix});
    return s;
  }
  const std::string p = "model.layers." + std::to_string(group) + ".";
  s.push_back({p + "input_layernorm.weight", {H}, TensorRole::Vector});
  s.push_back({p + "self_attn.q_proj.weight", {q_out, H}, TensorRole::Matrix});
  s.push_back({p + "self_attn.k_proj.weight", {kv_out, H}, TensorRole::Matrix});
  s.push_back({p + "self_attn.v_proj.weight", {kv_out, H}, TensorRole::Matrix});
  if (c.qkv_bias) {
    s.push_back({p + "self_attn.q_proj.bias", {q_out}, TensorRole::Vector});
    s.push_back({p + "self_attn.k_proj.bias", {kv_out}, TensorRole::Vector});
    s.push_back({p + "self_attn.v_proj.bias", {kv_out}, TensorRole::Vector});
  }
  s.push_back({p + "self_attn.o_proj.weight", {H, q_out}, TensorRole::Matrix});
  if (c.o_bias) s.push_back({p + "self_attn.o_proj.bias", {H}, TensorRole::Vector});
  s.push_back({p + "post_attention_layernorm.weight", {H}, TensorRole::Vector});
  s.push_back({p + "mlp.gate_proj.weight", {I, H}, TensorRole::Matrix});
  s.push_back({p + "mlp.up_proj.weight", {I, H}, TensorRole::Matrix});
  s.push_back({p + "mlp.down_proj.weight", {H, I}, TensorRole::Matrix});
  if (c.mlp_bias) {
    s.push_back({p + "mlp.gate_proj.bias", {I}, TensorRole::Vector});
    s.push_back({p + "mlp.up_proj.bias", {I}, TensorRole::Vector});
    s.push_back({p + "mlp.down_proj.bias", {H}, TensorRole::Vector});
  }
  return s;
}

DenseDecoder::DenseDecoder(const ModelConfig& cfg, const WeightStore& w, ThreadPool& pool)
    : cfg_(cfg), pool_(pool), rope_(cfg, cfg.head_dim, kc::RopeStyle::RotateHalf) {
  const int64_t H = cfg.hidden_size, I = cfg.intermediate_size, D = cfg.head_dim;
  const int64_t q_out = cfg.n_heads * D, kv_out = cfg.n_kv_heads * D;
  embed_tokens_ = w.get("model.embed_tokens.weight", {cfg.vocab_size, H});
  RINFER_CHECK(embed_tokens_.dtype == DType::F32 || embed_tokens_.dtype == DType::F16 ||
                   embed_tokens_.dtype == DType::BF16,
               "model.embed_tokens.weight: unsupported dtype ", dtype_name(embed_tokens_.dtype));
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Layer L;
    L.attn_norm = RMSNorm::load(w, p + "input_layernorm.weight", H, cfg.rms_norm_eps);
    L.mlp_norm = RMSNorm::load(w, p + "post_attention_layernorm.weight", H, cfg.rms_norm_eps);
    L.q = Linear::load(w, p + "self_attn.q_proj", H, q_out, cfg.qkv_bias);
    L.k = Linear::load(w, p + "self_attn.k_proj", H, kv_out, cfg.qkv_bias);
    L.v = Linear::load(w, p + "self_attn.v_proj", H, kv_out, cfg.qkv_bias);
    L.o = Linear::load(w, p + "self_attn.o_proj", q_out, H, cfg.o_bias);
    L.gate = Linear::load(w, p + "mlp.gate_proj", H, I, cfg.mlp_bias);
    L.up = Linear::load(w, p + "mlp.up_proj", H, I, cfg.mlp_bias);
    L.down = Linear::load(w, p + "mlp.down_proj", I, H, cfg.mlp_bias);
    layers_.push_back(L);
  }
  final_norm_ = RMSNorm::load(w, "model.norm.weight", H, cfg.rms_norm_eps);
  if (cfg.tie_word_embeddings) {
    lm_head_.weight = embed_tokens_;
    lm_head_.in = H;
    lm_head_.out = cfg.vocab_size;
  } else {
    lm_head_ = Linear::load(w, "lm_head", H, cfg.vocab_size, false);
  }
}

uint64_t DenseDecoder::weight_bytes_per_token() const {
  uint64_t n = lm_head_.bytes();
  for (const auto& L : layers_)
    n += L.q.bytes() + L.k.bytes() + L.v.bytes() + L.o.bytes() + L.gate.bytes() + L.up.bytes() + L.down.bytes();
  return n;
}

void DenseDecoder::ensure_workspace(int64_t T, int64_t max_ctx) {
  if (T <= ws_tokens_ && max_ctx <= ws_ctx_) return;
  ws_tokens_ = std::max(T, ws_tokens_);
  ws_ctx_ = std::max(max_ctx, ws_ctx_);
  const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size, D = cfg_.head_dim;
  const size_t f = sizeof(float);
  const size_t t = size_t(ws_tokens_);
  x_ = Buffer(t * H * f);
  h_ = Buffer(t * H * f);
  q_ = Buffer(t * cfg_.n_heads * D * f);
  k_ = Buffer(t * cfg_.n_kv_heads * D * f);
  v_ = Buffer(t * cfg_.n_kv_heads * D * f);
  attn_ = Buffer(t * cfg_.n_heads * D * f);
  gate_ = Buffer(t * I * f);
  up_ = Buffer(t * I * f);
  sel_ = Buffer(t * H * f);
  scores_ = Buffer(size_t(pool_.size()) * size_t(ws_ctx_) * f);
  tok_pos_.assign(t, 0);
  tok_item_.assign(t, 0);
}

void DenseDecoder::embed(std::span<const BatchItem> batch) {
  const int64_t H = cfg_.hidden_size;
  const size_t esz = dtype_size(embed_tokens_.dtype);
  float* x = x_.as<float>();
  int64_t t = 0;
  for (const auto& item : batch)
    for (int32_t id : item.tokens) {
      RINFER_CHECK(id >= 0 && id < cfg_.vocab_size, "token id ", id, " is outside the vocabulary [0, ",
                   cfg_.vocab_size, ")");
      convert_to_f32(embed_tokens_.dtype, embed_tokens_.as<uint8_t>() + size_t(id) * H * esz, x + t * H, size_t(H));
      ++t;
    }
}

void DenseDecoder::attention(std::span<const BatchItem> batch, KVCache& kv, int64_t layer) {
  const int64_t D = cfg_.head_dim, NH = cfg_.n_heads, NKV = cfg_.n_kv_heads;
  const int64_t group = NH / NKV;
  const float scale = float(1.0 / std::sqrt(double(D)));
  kc::PagedKV cache = kv.layer(layer);
  // Write the new tokens' K and V into their slots first: causal attention of
  // token t then reads positions [0, pos_t] straight from the cache.
  int64_t t = 0;
  for (const auto& item : batch)
    for (size_t i = 0; i < item.tokens.size(); ++i, ++t) {
      int64_t pos = item.start_pos + int64_t(i);
      int64_t slot = int64_t(item.block_table[pos / kv.block_size()]) * kv.block_size() + pos % kv.block_size();
      kc::store_kv(cache, slot, k_.as<float>() + t * NKV * D, v_.as<float>() + t * NKV * D);
    }
  const int64_t T = t;
  float* q = q_.as<float>();
  float* out = attn_.as<float>();
  float* scores = scores_.as<float>();
  pool_.run(T * NH, [&](int64_t task, int thread) {
    const int64_t tok = task / NH, head = task % NH;
    const BatchItem& item = batch[size_t(tok_item_[tok])];
    const int64_t pos = tok_pos_[tok];
    kc::attention_head(q + (tok * NH + head) * D, cache, int(head / group), item.block_table.data(), pos + 1, scale,
                       0.0f, out + (tok * NH + head) * D, scores + int64_t(thread) * ws_ctx_);
  });
}

void DenseDecoder::forward(std::span<const BatchItem> batch, KVCache& kv, float* logits) {
  const int64_t H = cfg_.hidden_size, D = cfg_.head_dim, NH = cfg_.n_heads, NKV = cfg_.n_kv_heads;
  const int64_t I = cfg_.intermediate_size;
  int64_t T = 0, max_ctx = 0;
  for (const auto& item : batch) {
    const int64_t end = item.start_pos + int64_t(item.tokens.size());
    RINFER_CHECK(!item.tokens.empty(), "forward: empty sequence in batch");
    RINFER_CHECK(int64_t(item.block_table.size()) * kv.block_size() >= end,
                 "forward: block table covers fewer than ", end, " positions");
    T += int64_t(item.tokens.size());
    max_ctx = std::max(max_ctx, end);
  }
  ensure_workspace(T, max_ctx);
  {
    int64_t t = 0;
    for (size_t b = 0; b < batch.size(); ++b)
      for (size_t i = 0; i < batch[b].tokens.size(); ++i, ++t) {
        tok_item_[t] = int64_t(b);
        tok_pos_[t] = batch[b].start_pos + int64_t(i);
      }
  }
  embed(batch);
  float *x = x_.as<float>(), *h = h_.as<float>(), *q = q_.as<float>(), *k = k_.as<float>(), *v = v_.as<float>();
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const Layer& L = layers_[l];
    L.attn_norm.forward(x, T, h);
    L.q.forward(h, T, q, pool_);
    L.k.forward(h, T, k, pool_);
    L.v.forward(h, T, v, pool_);
    for (int64_t t = 0; t < T; ++t) {
      const BatchItem& item = batch[size_t(tok_item_[t])];
      const int64_t seq_len = item.start_pos + int64_t(item.tokens.size());
      rope_.apply(q + t * NH * D, NH, D, tok_pos_[t], seq_len);
      rope_.apply(k + t * NKV * D, NKV, D, tok_pos_[t], seq_len);
    }
    attention(batch, kv, l);
    L.o.forward(attn_.as<float>(), T, h, pool_);
    kc::add_inplace(x, h, T * H);
    L.mlp_norm.forward(x, T, h);
    L.gate.forward(h, T, gate_.as<float>(), pool_);
    L.up.forward(h, T, up_.as<float>(), pool_);
    kc::silu_mul(gate_.as<float>(), up_.as<float>(), gate_.as<float>(), T * I);
    L.down.forward(gate_.as<float>(), T, h, pool_);
    kc::add_inplace(x, h, T * H);
  }
  // Only the rows that want logits go through the final norm and the head.
  float* sel = sel_.as<float>();
  int64_t rows = 0, t = 0;
  for (const auto& item : batch) {
    const int64_t n = int64_t(item.tokens.size());
    if (item.all_logits) {
      final_norm_.forward(x + t * H, n, sel + rows * H);
      rows += n;
    } else {
      final_norm_.forward(x + (t + n - 1) * H, 1, sel + rows * H);
      rows += 1;
    }
    t += n;
  }
  lm_head_.forward(sel, rows, logits, pool_);
}

}  // namespace rinfer

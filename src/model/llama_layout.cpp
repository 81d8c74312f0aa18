#include "model/llama_layout.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace rinfer {

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

std::vector<TensorSpec> llama_global_specs(const ModelConfig& c) {
  std::vector<TensorSpec> s;
  s.push_back({"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, TensorRole::Embedding});
  s.push_back({"model.norm.weight", {c.hidden_size}, TensorRole::Vector});
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}, TensorRole::Matrix});
  return s;
}

std::vector<TensorSpec> llama_attention_specs(const ModelConfig& c, int64_t layer) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  const int64_t q_out = c.n_heads * D, kv_out = c.n_kv_heads * D;
  const std::string p = layer_prefix(layer);
  std::vector<TensorSpec> s;
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
  return s;
}

std::vector<TensorSpec> gated_mlp_specs(const std::string& prefix, int64_t hidden, int64_t inter, bool bias,
                                        const char* gate, const char* up, const char* down) {
  std::vector<TensorSpec> s;
  s.push_back({prefix + gate + ".weight", {inter, hidden}, TensorRole::Matrix});
  s.push_back({prefix + up + ".weight", {inter, hidden}, TensorRole::Matrix});
  s.push_back({prefix + down + ".weight", {hidden, inter}, TensorRole::Matrix});
  if (bias) {
    s.push_back({prefix + gate + ".bias", {inter}, TensorRole::Vector});
    s.push_back({prefix + up + ".bias", {inter}, TensorRole::Vector});
    s.push_back({prefix + down + ".bias", {hidden}, TensorRole::Vector});
  }
  return s;
}

std::vector<TensorSpec> llama_tensor_specs(const ModelConfig& c, int64_t group) {
  if (group == kGlobalGroup) return llama_global_specs(c);
  auto s = llama_attention_specs(c, group);
  auto m = gated_mlp_specs(layer_prefix(group) + "mlp.", c.hidden_size, c.intermediate_size, c.mlp_bias);
  s.insert(s.end(), m.begin(), m.end());
  return s;
}

std::unique_ptr<AttentionBlock> make_llama_attention(const ModelConfig& c, const WeightStore& w, const Shard& shard,
                                                     int64_t layer, std::shared_ptr<const RotaryEmbedding> rope,
                                                     std::vector<float> alibi) {
  return std::make_unique<GqaAttention>(GqaAttention::load({c.hidden_size, c.n_heads, c.n_kv_heads, c.head_dim}, w,
                                                           layer_prefix(layer) + "self_attn.", c.qkv_bias, c.o_bias,
                                                           std::move(rope), std::move(alibi), shard));
}

std::unique_ptr<Model> make_llama_decoder(const ModelConfig& c, const WeightStore& w, const Shard& shard,
                                          FfnFactory ffn, AttentionFactory attn, KVCacheShape kv_shape) {
  auto rope = std::make_shared<const RotaryEmbedding>(c, c.head_dim, RopeStyle::RotateHalf);
  if (!attn) attn = [&](int64_t l) { return make_llama_attention(c, w, shard, l, rope); };
  if (!ffn)
    ffn = [&](int64_t l) {
      return std::make_unique<GatedMLP>(
          GatedMLP::load(w, layer_prefix(l) + "mlp.", c.hidden_size, c.intermediate_size, "gate_proj", "up_proj",
                         "down_proj", c.mlp_bias, shard));
    };
  const bool default_kv = kv_shape.n_layers == 0;
  if (default_kv) kv_shape = {c.n_layers, c.n_kv_heads, c.head_dim};
  // A pipeline stage builds its layers only, and caches their K/V only.
  const Range stage = shard.stage_layers(c.n_layers);
  RINFER_CHECK(stage.begin >= 0 && stage.end <= c.n_layers && stage.size() > 0, "pipeline stage ", shard.stage,
               ": layers [", stage.begin, ", ", stage.end, ") of ", c.n_layers);
  kv_shape.n_layers = stage.size();
  std::vector<DecoderLayer> layers;
  for (int64_t l = stage.begin; l < stage.end; ++l) {
    const std::string p = layer_prefix(l);
    DecoderLayer L;
    L.attn_norm = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, c.rms_norm_eps);
    L.ffn_norm = RMSNorm::load(w, p + "post_attention_layernorm.weight", c.hidden_size, c.rms_norm_eps);
    L.attn = attn(l);
    if (default_kv && L.attn->cached_kv_heads() > 0) kv_shape.n_kv_heads = L.attn->cached_kv_heads();
    L.ffn = ffn(l);
    layers.push_back(std::move(L));
  }
  // Vocab-parallel: the shard's rows of the table and of the output layer.
  const Range vocab = shard.whole() ? Range{0, c.vocab_size} : shard_range(c.vocab_size, shard, Decoder::kVocabAlign);
  DecoderEnds ends;
  ends.vocab = vocab;
  const bool tied_head = c.tie_word_embeddings && !w.has("lm_head.weight");
  // Tied embeddings may be stored blocked (BF16 [V/8, H/32, 8, 32]): the
  // output layer then takes the blocked GEMV and the decoder gathers rows.
  // The first stage looks rows up in the table; the last multiplies by it
  // when it is the output layer too; a middle stage holds neither.
  if (shard.first_stage() || (shard.last_stage() && tied_head)) {
    const char* embed_name = "model.embed_tokens.weight";
    const auto eit = w.tensors().find(embed_name);
    const bool embed_blocked = c.tie_word_embeddings && eit != w.tensors().end() &&
                               eit->second.dtype == DType::BF16 && eit->second.shape.size() == 4;
    const TensorView embed = embed_blocked ? eit->second : w.get(embed_name, {c.vocab_size, c.hidden_size});
    if (shard.last_stage() && tied_head) {
      MatrixDesc m;
      m.format = embed_blocked ? MatrixFormat::BlockedBf16 : MatrixFormat::Dense;
      m.dtype = embed.dtype;
      m.data = embed.data;
      m.N = c.vocab_size;
      m.K = c.hidden_size;
      ends.lm_head = Linear::over(ops::matrix_rows(m, vocab.begin, vocab.end),
                                  shard.whole() ? ParallelMode::Replicated : ParallelMode::Column, vocab);
      if (!shard.whole()) ends.lm_head.own_copy(w, embed_name);
    }
    if (shard.first_stage()) {
      ends.embed = embed;
      if (!shard.whole()) {
        // The shard's rows: [V/8, H/32, 8, 32] blocked, [V, H] otherwise.
        const size_t row_bytes = size_t(c.hidden_size) * dtype_size(embed.dtype);
        ends.embed.data = static_cast<const uint8_t*>(embed.data) + size_t(vocab.begin) * row_bytes;
        ends.embed.shape = embed_blocked ? Shape{vocab.size() / 8, c.hidden_size / 32, 8, 32}
                                         : Shape{vocab.size(), c.hidden_size};
      }
    }
  }
  if (shard.last_stage()) {
    // Tied, unless the converter wrote a quantized copy of the table as the
    // output layer (convert --lm-head).
    if (!tied_head) ends.lm_head = Linear::load_rows(w, "lm_head", c.hidden_size, c.vocab_size, false, vocab);
    ends.final_norm = RMSNorm::load(w, "model.norm.weight", c.hidden_size, c.rms_norm_eps);
  }
  return std::make_unique<Decoder>(c, std::move(ends), std::move(layers), kv_shape, shard);
}

bool stage_wants_tensor(const ModelConfig& c, const Shard& shard, const std::string& name) {
  const std::string lp = "model.layers.";
  if (name.compare(0, lp.size(), lp) == 0) {
    const int64_t l = std::atoll(name.c_str() + lp.size());
    const Range r = shard.stage_layers(c.n_layers);
    if (l < r.begin || l >= r.end) return false;
    // Expert parallelism: only the experts placed on this rank.
    const size_t at = name.find(".experts.");
    if (shard.ep_world > 1 && shard.experts && at != std::string::npos) {
      const int64_t e = std::atoll(name.c_str() + at + 9);
      const int64_t n = int64_t(c.family.contains("moe") ? c.family.at("moe").value("n_experts", 0) : 0);
      if (n <= 0 || e >= n) return true;
      const LayerPlacement p = shard.experts->layer(l, n);
      const auto& mine = p.rank_experts[size_t(shard.ep_rank)];
      return std::find(mine.begin(), mine.end(), int32_t(e)) != mine.end();
    }
    return true;
  }
  auto starts = [&](const char* p) { return name.compare(0, std::strlen(p), p) == 0; };
  if (starts("lm_head.") || starts("model.norm.")) return shard.last_stage();
  if (starts("model.embed_tokens.")) return shard.first_stage() || (shard.last_stage() && c.tie_word_embeddings);
  return true;
}

}  // namespace rinfer

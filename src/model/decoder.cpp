#include "model/decoder.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "model/moe.h"
#include "model/stage_profile.h"

namespace rinfer {

Decoder::Decoder(const ModelConfig& cfg, DecoderEnds ends, std::vector<DecoderLayer> layers, KVCacheShape kv_shape,
                 const Shard& shard)
    : cfg_(cfg), embed_(std::move(ends.embed)), vocab_(ends.vocab), layers_(std::move(layers)),
      final_norm_(ends.final_norm), lm_head_(ends.lm_head), kv_shape_(kv_shape), shard_(shard) {
  const int64_t V = vocab_.size();
  RINFER_CHECK(vocab_.begin >= 0 && vocab_.end <= cfg.vocab_size && V > 0, "token embeddings: rows [", vocab_.begin,
               ", ", vocab_.end, ") of a vocabulary of ", cfg.vocab_size);
  RINFER_CHECK(!layers_.empty() && int64_t(layers_.size()) == kv_shape_.n_layers, "decoder: ", layers_.size(),
               " layers, a KV cache shape of ", kv_shape_.n_layers);
  RINFER_CHECK(!shard_.last_stage() || (!lm_head_.empty() && final_norm_.weight),
               "decoder: the last pipeline stage needs the final norm and the output layer");
  if (!shard_.first_stage()) return;
  RINFER_CHECK(embed_.dtype == DType::F32 || embed_.dtype == DType::F16 || embed_.dtype == DType::BF16,
               "token embeddings: unsupported dtype ", dtype_name(embed_.dtype));
  // [V, H], or BF16 blocked [V/8, H/32, 8, 32] (tied embeddings, see llama_layout.cpp).
  embed_blocked_ = embed_.dtype == DType::BF16 && embed_.shape.size() == 4;
  const Shape blocked = {V / 8, cfg.hidden_size / 32, 8, 32};
  RINFER_CHECK(embed_blocked_ ? ops::bf16_blockable(V, cfg.hidden_size) && embed_.shape == blocked
                              : embed_.shape.size() == 2 && embed_.shape[0] == V && embed_.shape[1] == cfg.hidden_size,
               "token embeddings have shape ", shape_str(embed_.shape), ", expected [", V, ", ", cfg.hidden_size, "]");
}

uint64_t Decoder::weight_bytes_per_token() const {
  uint64_t n = lm_head_.bytes();
  for (const auto& L : layers_) n += L.attn->weight_bytes() + L.ffn->weight_bytes_per_token();
  return n;
}

// One row per layer of what `of` says of its MoE block (an empty row for a
// dense layer or one of another pipeline stage, so that row l is layer l);
// empty when no layer says anything.
template <typename Of>
std::vector<std::vector<uint64_t>> Decoder::per_moe_layer(Of of) const {
  std::vector<std::vector<uint64_t>> rows(static_cast<size_t>(shard_.stage_layers(cfg_.n_layers).begin));
  bool any = false;
  for (const auto& L : layers_) {
    const auto* moe = dynamic_cast<const MoeFeedForward*>(L.ffn.get());
    rows.push_back(moe ? of(*moe) : std::vector<uint64_t>{});
    any = any || !rows.back().empty();
  }
  return any ? rows : std::vector<std::vector<uint64_t>>{};
}

std::vector<std::vector<uint64_t>> Decoder::expert_counts() const {
  return per_moe_layer([](const MoeFeedForward& m) { return m.expert_counts(); });
}

std::vector<std::vector<uint64_t>> Decoder::expert_rank_tokens() const {
  return per_moe_layer([](const MoeFeedForward& m) { return m.rank_tokens(); });
}

void Decoder::place_experts(const ExpertPlan& plan) {
  const int64_t first = shard_.stage_layers(cfg_.n_layers).begin;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (auto* moe = dynamic_cast<MoeFeedForward*>(layers_[i].ffn.get());
        moe && plan.layers.count(first + int64_t(i)) != 0)
      moe->place(plan.layer(first + int64_t(i), moe->n_experts()));
}

void Decoder::forward(std::span<const BatchItem> batch, const KvView& kv, float* logits, const RunContext& run) {
  const int64_t H = cfg_.hidden_size;
  int64_t T = 0, max_ctx = 0;
  for (const auto& item : batch) {
    const int64_t end = item.start_pos + int64_t(item.tokens.size());
    RINFER_CHECK(!item.tokens.empty(), "forward: empty sequence in batch");
    RINFER_CHECK(int64_t(item.block_table.size()) * kv.block_size >= end, "forward: block table covers fewer than ",
                 end, " positions");
    T += int64_t(item.tokens.size());
    max_ctx = std::max(max_ctx, end);
  }
  RINFER_CHECK(int64_t(kv.layers.size()) == int64_t(layers_.size()), "forward: the KV cache has ", kv.layers.size(),
               " layers, the model ", layers_.size());
  if (int64_t(tok_pos_.size()) < T) {
    tok_pos_.resize(size_t(T));
    tok_item_.resize(size_t(T));
  }
  block_tables_.resize(batch.size());
  for (size_t b = 0; b < batch.size(); ++b) block_tables_[b] = batch[b].block_table.data();
  const ExecContext& exec = run.exec;
  Communicator& comm = run.comm ? *run.comm : single_process();
  // A shard run without its peers would be silently wrong: its partial sums
  // never meet the others'.
  RINFER_CHECK(comm.world() == shard_.world && comm.rank() == shard_.rank, "the model was loaded as rank ",
               shard_.rank, " of ", shard_.world, " but runs as rank ", comm.rank(), " of ", comm.world());
  const bool vocab_parallel = vocab_.size() != cfg_.vocab_size;
  bool prompt = false;
  for (const auto& item : batch) prompt = prompt || item.tokens.size() > 1;
  profile::ForwardScope forward_scope(prompt ? profile::Phase::Prefill : profile::Phase::Decode);
  float* x = ws_.get(Workspace::kX, size_t(T * H));
  float* h = ws_.get(Workspace::kH, size_t(T * H));
  float* o = ws_.get(Workspace::kOut, size_t(T * H));
  const size_t esz = dtype_size(embed_.dtype);
  int64_t t = 0;
  {
    for (size_t b = 0; b < batch.size(); ++b)
      for (size_t i = 0; i < batch[b].tokens.size(); ++i, ++t) {
        const int32_t id = batch[b].tokens[i];
        RINFER_CHECK(id >= 0 && id < cfg_.vocab_size, "token id ", id, " is outside the vocabulary [0, ",
                     cfg_.vocab_size, ")");
        tok_item_[t] = int64_t(b);
        tok_pos_[t] = batch[b].start_pos + int64_t(i);
      }
  }
  if (!shard_.first_stage()) {
    // The previous stage's hidden states.
    RINFER_CHECK(run.stage_input, "pipeline stage ", shard_.stage, " runs without the previous stage's hidden states");
    std::memcpy(x, run.stage_input, size_t(T * H) * sizeof(float));
  } else {
    profile::Scope s(profile::Stage::Embed);
    // The rows come from all over the table (a blocked row is one cache line
    // per 32 values, 512 bytes apart), so a prompt's are split over the pool.
    for_rows(exec, T, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const BatchItem& item = batch[size_t(tok_item_[r])];
        int32_t id = item.tokens[size_t(tok_pos_[r] - item.start_pos)];
        if (vocab_parallel) {
          // The shard holds rows [vocab_.begin, vocab_.end) of the table.
          if (id < vocab_.begin || id >= vocab_.end) {
            std::fill(x + r * H, x + (r + 1) * H, 0.0f);
            continue;
          }
          id -= int32_t(vocab_.begin);
        }
        if (embed_blocked_) {
          // Row id is 32-value pieces, one per 8 x 32 tile of its 8-row group.
          const auto* e = embed_.as<uint16_t>() + (int64_t(id) / 8) * 8 * H + (id % 8) * 32;
          for (int64_t k = 0; k < H; k += 32) convert_to_f32(DType::BF16, e + k * 8, x + r * H + k, 32);
        } else {
          convert_to_f32(embed_.dtype, embed_.as<uint8_t>() + size_t(id) * H * esz, x + r * H, size_t(H));
        }
      }
    });
  }
  if (vocab_parallel && shard_.first_stage()) {
    profile::CommScope s(uint64_t(T * H) * sizeof(float));
    comm.all_reduce_sum(x, T * H);
  }
  TokenAngles angles;
  ForwardContext ctx;
  ctx.exec = exec;
  ctx.comm = &comm;
  ctx.expert_comm = run.expert_comm ? run.expert_comm : &single_process();
  ctx.batch = batch;
  ctx.tokens = {T, tok_pos_.data(), tok_item_.data(), block_tables_.data(), max_ctx};
  ctx.kv = &kv;
  ctx.ws = &ws_;
  ctx.angles = &angles;
  for (int64_t l = 0; l < int64_t(layers_.size()); ++l) {
    DecoderLayer& L = layers_[size_t(l)];
    auto norm = [&](const RMSNorm& n) {
      profile::Scope s(profile::Stage::Norm);
      n.forward(exec, x, T, h);
    };
    auto residual = [&] {
      profile::Scope s(profile::Stage::Residual);
      for_rows(exec, T, [&](int64_t r0, int64_t r1) { ops::add_inplace(x + r0 * H, o + r0 * H, (r1 - r0) * H); });
    };
    // x += o, then h = norm(x), row by row: the norm reads each row while
    // the add has it in L1, and the pool runs one job instead of two. (The
    // add's time is the norm stage's then.)
    auto residual_norm = [&](const RMSNorm& n) {
      profile::Scope s(profile::Stage::Norm);
      for_rows(exec, T, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          ops::add_inplace(x + r * H, o + r * H, H);
          n.forward(x + r * H, 1, h + r * H);
        }
      });
    };
    if (l == 0) norm(L.attn_norm);
    L.attn->forward(h, ctx, l, o);
    residual_norm(L.ffn_norm);
    L.ffn->forward(h, T, o, ctx);
    if (l + 1 < int64_t(layers_.size()))
      residual_norm(layers_[size_t(l + 1)].attn_norm);
    else
      residual();
  }
  if (!shard_.last_stage()) {
    RINFER_CHECK(run.stage_output, "pipeline stage ", shard_.stage, " runs without a place for its hidden states");
    std::memcpy(run.stage_output, x, size_t(T * H) * sizeof(float));
    return;
  }
  // Only the rows that want logits go through the final norm and the head.
  const int64_t rows = logit_rows(batch);
  if (rows == 0) return;
  profile::Scope head_scope(profile::Stage::LmHead, [&] { return lm_head_.bytes(); });
  float* sel = ws_.get(Workspace::kSel, size_t(rows * H));
  int64_t r = 0;
  t = 0;
  for (const auto& item : batch) {
    const int64_t n = int64_t(item.tokens.size());
    const int64_t first = item.logits == LogitRows::All ? t : t + n - 1;
    const int64_t count = item.logits == LogitRows::All ? n : item.logits == LogitRows::Last ? 1 : 0;
    if (count > 0) final_norm_.forward(x + first * H, count, sel + r * H);
    r += count;
    t += n;
  }
  if (!vocab_parallel) {
    lm_head_.forward(ctx, sel, rows, logits);
    return;
  }
  // Each rank's logit columns, gathered into whole rows.
  local_logits_.resize(size_t(rows * vocab_.size()));
  lm_head_.forward(ctx, sel, rows, local_logits_.data());
  std::vector<int64_t> counts(size_t(comm.world()));
  for (int r = 0; r < comm.world(); ++r)
    counts[size_t(r)] = shard_range(cfg_.vocab_size, {r, comm.world()}, kVocabAlign).size();
  profile::CommScope gather(uint64_t(rows * vocab_.size()) * sizeof(float));
  comm.all_gather_columns(local_logits_.data(), rows, counts, logits);
}

}  // namespace rinfer

#include "runtime/draft_model.h"

#include <algorithm>
#include <chrono>

namespace rinfer {

namespace {
// The prompt goes through the draft in chunks, as the Generator's prefill.
constexpr int64_t kChunk = 512;
}  // namespace

DraftModel::DraftModel(ModelRunner& runner) : runner_(runner), vocab_(runner.vocab_size()) {}
DraftModel::~DraftModel() { finish(); }

void DraftModel::start(const SamplingParams& sampling) {
  finish();
  SamplingParams p = sampling;
  // Its own stream: the target's draws decide acceptance.
  p.seed = sampling.seed ^ 0xd1b54a32d192ed03ull;
  sampler_ = Sampler(p);
  greedy_ = p.temperature == 0.0f;
  stopped_ = false;
  valid_ = 0;
  seconds_ = 0;
}

void DraftModel::finish() { runner_.kv().release(blocks_); }

std::span<const int32_t> DraftModel::propose(std::span<const int32_t> history, int64_t k) {
  const auto t0 = std::chrono::steady_clock::now();
  drafts_.clear();
  const int64_t n = int64_t(history.size());
  const int64_t limit = std::min(runner_.config().max_position_embeddings, runner_.kv().capacity_tokens());
  k = std::min(k, limit - n);
  for (int64_t i = valid_; i < n && !stopped_; ++i) stopped_ = history[size_t(i)] < 0 || history[size_t(i)] >= vocab_;
  if (k <= 0 || stopped_ || n == 0) return {};
  runner_.kv().reserve(blocks_, n + k - 1);
  logits_.resize(size_t(vocab_));
  // The tokens it has not seen; the last one's logits give the first draft.
  for (int64_t b = std::min(valid_, n - 1); b < n; b += kChunk) {
    const int64_t len = std::min(kChunk, n - b);
    BatchItem item{history.subspan(size_t(b), size_t(len)), b, blocks_,
                   b + len == n ? LogitRows::Last : LogitRows::None};
    runner_.forward({&item, 1}, logits_.data());
  }
  valid_ = n;
  hist_.assign(history.begin(), history.end());
  q_.resize(greedy_ ? 0 : size_t(k * vocab_));
  for (int64_t j = 0; j < k; ++j) {
    int32_t d;
    if (greedy_) {
      d = sampler_.sample(logits_.data(), vocab_, hist_);
    } else {
      sampler_.distribution(logits_.data(), vocab_, hist_, q_row_);
      d = sampler_.draw(q_row_);
      if (d < 0) break;  // non-finite draft logits: no drafts this step
      std::copy(q_row_.begin(), q_row_.end(), q_.begin() + j * vocab_);
    }
    drafts_.push_back(d);
    hist_.push_back(d);
    if (j + 1 == k) break;
    tokens_.assign(1, d);
    BatchItem item{tokens_, n + j, blocks_, LogitRows::Last};
    runner_.forward({&item, 1}, logits_.data());
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return drafts_;
}

std::span<const float> DraftModel::q(int64_t i) const {
  if (greedy_) return {};
  return std::span<const float>(q_).subspan(size_t(i * vocab_), size_t(vocab_));
}

void DraftModel::accepted(int64_t n_history, int64_t accepted) {
  // Drafts 0 .. k-2 went through the draft; the last one did not.
  const int64_t forwarded = std::max<int64_t>(int64_t(drafts_.size()) - 1, 0);
  valid_ = std::min(valid_, n_history) + std::min(accepted, forwarded);
}

}  // namespace rinfer

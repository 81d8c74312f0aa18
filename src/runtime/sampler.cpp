#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace rinfer {

void SamplingParams::validate() const {
  RINFER_CHECK(std::isfinite(temperature) && temperature >= 0, "--temperature must be >= 0, got ", temperature);
  RINFER_CHECK(top_k >= 0, "--top-k must be >= 0, got ", top_k);
  RINFER_CHECK(std::isfinite(top_p) && top_p > 0 && top_p <= 1, "--top-p must be in (0, 1], got ", top_p);
  RINFER_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0,
               "--repetition-penalty must be > 0, got ", repetition_penalty);
}

Sampler::Sampler(const SamplingParams& p) : p_(p), state_(p.seed ^ 0x9e3779b97f4a7c15ull) { p.validate(); }

double Sampler::uniform() {
  // splitmix64: tiny, fast, and identical on every platform (std::
  // distributions are not), so a seed reproduces everywhere.
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * (1.0 / 9007199254740992.0);
}

// The kernel, not a scalar loop: over qwen2.5's 151936 logits, as the output
// layer leaves them, the loop took 46 µs a token and the kernel 25 (2 threads).
int32_t Sampler::argmax(const float* logits, int64_t n) { return int32_t(kernels::cpu::argmax(logits, n)); }

int32_t Sampler::sample(float* logits, int64_t n, std::span<const int32_t> history) {
  if (p_.repetition_penalty != 1.0f) {
    // Once per distinct token, as HF does (its gather/scatter ignores repeats).
    seen_.assign(size_t(n), 0);
    for (int32_t id : history) {
      if (id < 0 || id >= n || seen_[id]) continue;
      seen_[id] = 1;
      float& l = logits[id];
      l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    }
  }
  if (p_.temperature == 0.0f) return argmax(logits, n);
  idx_.resize(size_t(n));
  std::iota(idx_.begin(), idx_.end(), 0);
  int64_t keep = n;
  if (p_.top_k > 0 && p_.top_k < n) {
    keep = p_.top_k;
    std::partial_sort(idx_.begin(), idx_.begin() + keep, idx_.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
  } else {
    std::sort(idx_.begin(), idx_.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
  }
  probs_.resize(size_t(keep));
  const float mx = logits[idx_[0]];
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    probs_[i] = float(std::exp(double(logits[idx_[i]] - mx) / p_.temperature));
    sum += probs_[i];
  }
  if (p_.top_p < 1.0f) {
    double cum = 0;
    int64_t cut = keep;
    for (int64_t i = 0; i < keep; ++i) {
      cum += probs_[i] / sum;
      if (cum >= p_.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    sum = 0;
    for (int64_t i = 0; i < keep; ++i) sum += probs_[i];
  }
  double r = uniform() * sum;
  for (int64_t i = 0; i < keep; ++i) {
    r -= probs_[i];
    if (r < 0) return idx_[i];
  }
  return idx_[keep - 1];
}

}  // namespace rinfer

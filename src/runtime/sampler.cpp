#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>

#include "core/error.h"
#include "ops/ops.h"

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
int32_t Sampler::argmax(const float* logits, int64_t n) { return int32_t(ops::argmax(logits, n)); }

void Sampler::apply_penalty(float* logits, int64_t n, std::span<const int32_t> history) {
  if (p_.repetition_penalty == 1.0f) return;
  // Once per distinct token, as HF does (its gather/scatter ignores repeats).
  seen_.assign(size_t(n), 0);
  for (int32_t id : history) {
    if (id < 0 || id >= n || seen_[id]) continue;
    seen_[id] = 1;
    float& l = logits[id];
    l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
  }
}

// The top_k by logit (ties to the lower id) into idx_, their probabilities
// relative to the largest into probs_; returns how many of them top-p keeps.
int64_t Sampler::top_k_candidates(const float* logits, int64_t n) {
  idx_.resize(size_t(n));
  std::iota(idx_.begin(), idx_.end(), 0);
  std::partial_sort(idx_.begin(), idx_.begin() + p_.top_k, idx_.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  idx_.resize(size_t(p_.top_k));
  probs_.resize(size_t(p_.top_k));
  const float mx = logits[idx_[0]];
  for (size_t i = 0; i < idx_.size(); ++i) probs_[i] = float(std::exp(double(logits[idx_[i]] - mx) / p_.temperature));
  return top_p_prefix(probs_.data(), int64_t(idx_.size()), sum_of(probs_.data(), p_.top_k));
}

int32_t Sampler::sample(float* logits, int64_t n, std::span<const int32_t> history) {
  apply_penalty(logits, n, history);
  if (p_.temperature == 0.0f) return argmax(logits, n);
  if (p_.top_k > 0 && p_.top_k < n) {
    const int64_t keep = top_k_candidates(logits, n);
    return idx_[size_t(walk(probs_.data(), keep, uniform()))];
  }
  // Every token: softmax((logits - max) / T) as one op (vectorized, the sum
  // in double): scalar exponentials over a 150k vocabulary cost a token's
  // worth of time.
  probs_.resize(size_t(n));
  ops::softmax_tempered(logits, n, p_.temperature, probs_.data());
  const double u = uniform();
  if (p_.top_p >= 1.0f) return int32_t(walk(probs_.data(), n, u));  // in id order: no sort at all
  return top_p_draw(probs_.data(), n, u);
}

void Sampler::distribution(float* logits, int64_t n, std::span<const int32_t> history, std::vector<float>& probs) {
  apply_penalty(logits, n, history);
  probs.assign(size_t(n), 0.0f);
  if (p_.temperature == 0.0f) {
    probs[size_t(argmax(logits, n))] = 1.0f;
    return;
  }
  // The candidates sample() keeps, most probable first (ties to the lower
  // id), with their unnormalized probabilities.
  std::vector<float> w;
  if (p_.top_k > 0 && p_.top_k < n) {
    const int64_t keep = top_k_candidates(logits, n);
    idx_.resize(size_t(keep));
    w.assign(probs_.begin(), probs_.begin() + keep);
  } else {
    probs_.resize(size_t(n));
    ops::softmax_tempered(logits, n, p_.temperature, probs_.data());
    const double total = sum_of(probs_.data(), n);
    if (p_.top_p >= 1.0f) {
      for (int64_t i = 0; i < n; ++i) probs[size_t(i)] = float(double(probs_[size_t(i)]) / total);
      return;
    }
    // top-p: the kept tokens are the most probable ones up to the share
    // top_p, so they all lie above any threshold whose tokens already hold
    // that share; sorting only those is exact and cheap.
    const double need = double(p_.top_p) * total;
    for (double t = 1e-3;; t *= 1e-3) {
      idx_.clear();
      double mass = 0;
      for (int64_t i = 0; i < n; ++i)
        if (probs_[size_t(i)] >= t || t < 1e-40) idx_.push_back(int32_t(i)), mass += probs_[size_t(i)];
      if (mass >= need || t < 1e-40) break;
    }
    std::sort(idx_.begin(), idx_.end(), [&](int32_t a, int32_t b) {
      return probs_[size_t(a)] > probs_[size_t(b)] || (probs_[size_t(a)] == probs_[size_t(b)] && a < b);
    });
    double cum = 0;
    size_t k = 0;
    while (k < idx_.size() && (cum += probs_[size_t(idx_[k++])]) < need) {
    }
    idx_.resize(k);
    for (int32_t i : idx_) w.push_back(probs_[size_t(i)]);
  }
  const double total = sum_of(w.data(), int64_t(w.size()));
  for (size_t j = 0; j < idx_.size(); ++j) probs[size_t(idx_[j])] = float(double(w[j]) / total);
}

int32_t Sampler::draw(std::span<const float> probs) {
  const int64_t n = int64_t(probs.size());
  if (n == 0 || !(sum_of(probs.data(), n) > 0)) return -1;
  return int32_t(walk(probs.data(), n, uniform()));
}

// top-p over every token without sorting them all (a full sort of a 150k
// vocabulary costs more than the decode step): the tokens most probable first (ties to
// the lower id) up to the first whose running share reaches top_p are found
// by the probabilities' float bits, which order them (p >= 0): the mass per
// exponent, then per next 8 bits inside the exponent where the share
// crosses top_p, and only that bucket's tokens are sorted. The draw then
// walks the kept tokens above the bucket in id order, then the bucket's.
int32_t Sampler::top_p_draw(const float* p, int64_t n, double u) {
  auto key = [&](int64_t i) {
    uint32_t b;
    std::memcpy(&b, p + i, sizeof b);
    // Exponent and the top 8 bits of the mantissa. The sign is dropped: a
    // NaN with it set (from non-finite logits, reported after the draw)
    // would index past the histograms.
    return (b & 0x7fffffffu) >> 15;
  };
  // Four histograms in turn: most tokens fall in a few buckets, and one
  // histogram's adds would wait on each other through memory.
  double part[4][256] = {};
  double mass[256];
  auto merge = [&] {
    for (int b = 0; b < 256; ++b) mass[b] = (part[0][b] + part[1][b]) + (part[2][b] + part[3][b]);
    for (auto& h : part) std::fill(std::begin(h), std::end(h), 0.0);
  };
  for (int64_t i = 0; i < n; ++i) part[i & 3][key(i) >> 8] += p[i];
  merge();
  double total = 0;
  for (double m : mass) total += m;
  const double need = double(p_.top_p) * total;
  double cum = 0;  // the mass of the buckets above the one being looked at
  uint32_t e = 255;
  for (; e > 0 && cum + mass[e] < need; --e) cum += mass[e];
  idx_.clear();
  for (int64_t i = 0; i < n; ++i)
    if (key(i) >> 8 == e) part[i & 3][key(i) & 255] += p[i], idx_.push_back(int32_t(i));
  merge();
  uint32_t f = 255;
  for (; f > 0 && cum + mass[f] < need; --f) cum += mass[f];
  const uint32_t cross = e << 8 | f;  // tokens above it are kept whole
  size_t k = 0;
  for (int32_t i : idx_)
    if (key(i) == cross) idx_[k++] = i;
  idx_.resize(k);
  std::sort(idx_.begin(), idx_.end(), [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  for (k = 0; k < idx_.size();)
    if ((cum += p[idx_[k++]]) >= need) break;
  idx_.resize(k);  // the bucket's kept prefix; cum is now the kept mass
  double r = u * cum;
  int64_t last = -1;
  for (int64_t i = 0; i < n; ++i)
    if (key(i) > cross) {
      last = i;
      if ((r -= p[i]) < 0) return int32_t(i);
    }
  for (int32_t i : idx_)
    if ((r -= p[i]) < 0) return i;
  return !idx_.empty() ? idx_.back() : int32_t(last);  // rounding left r >= 0
}

// Sum in double with four chains: a single one is bound by the adds'
// latency (190 µs over 150k floats).
double Sampler::sum_of(const float* p, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const int64_t n4 = n - n % 4;
  for (int64_t i = 0; i < n4; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
  for (int64_t i = n4; i < n; ++i) s0 += p[i];
  return (s0 + s1) + (s2 + s3);
}

// The shortest prefix of p (most probable first) whose share of total
// reaches top_p; n when none does (or top_p is 1).
int64_t Sampler::top_p_prefix(const float* p, int64_t n, double total) const {
  if (p_.top_p >= 1.0f) return n;
  double cum = 0;
  for (int64_t i = 0; i < n; ++i) {
    cum += p[i] / total;
    if (cum >= p_.top_p) return i + 1;
  }
  return n;
}

// The index at which the running sum of p[0 .. n) passes u times their sum:
// blocks of 256 are skipped whole by their sums, then one by one.
int64_t Sampler::walk(const float* p, int64_t n, double u) {
  constexpr int64_t kBlock = 256;
  double r = u * sum_of(p, n);
  int64_t i = 0;
  for (double b; i + kBlock <= n && r - (b = sum_of(p + i, kBlock)) >= 0; i += kBlock) r -= b;
  for (; i < n; ++i) {
    r -= p[i];
    if (r < 0) return i;
  }
  for (i = n; i-- > 0;)  // rounding left r >= 0: the last one with any probability
    if (p[i] > 0) return i;
  return n - 1;
}

}  // namespace rinfer

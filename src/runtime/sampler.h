#pragma once
// Sampler: picks the next token from logits. temperature 0 is greedy (ties go
// to the lowest id, as the references do); otherwise repetition penalty,
// temperature, top-k, then top-p, then a draw from a seeded generator, so
// the same seed gives the same text (on the same kernel level: the softmax's
// exponentials are the kernels').
#include <cstdint>
#include <span>
#include <vector>

namespace rinfer {

struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;          // 0: off
  float top_p = 1.0f;         // 1: off
  float repetition_penalty = 1.0f;  // 1: off (HF/CTRL rule: divide positive, multiply negative logits)
  uint64_t seed = 0;

  void validate() const;  // throws rinfer::Error on out-of-range values
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // logits is modified in place. history: the tokens the penalty applies to.
  int32_t sample(float* logits, int64_t n_vocab, std::span<const int32_t> history);
  static int32_t argmax(const float* logits, int64_t n);

  // The distribution sample() draws from, as n_vocab probabilities summing
  // to 1 (penalty, temperature, top-k, top-p applied; temperature 0: all
  // mass on the argmax). For speculative decoding with a sampled draft,
  // whose acceptance rule compares two distributions. logits is modified.
  void distribution(float* logits, int64_t n_vocab, std::span<const int32_t> history, std::vector<float>& probs);
  // A draw from probabilities that need not sum to 1 (their sum scales the
  // draw); -1 when they sum to 0.
  int32_t draw(std::span<const float> probs);
  // The next uniform number in [0, 1) of this sampler's seeded stream.
  double uniform();

 private:
  void apply_penalty(float* logits, int64_t n, std::span<const int32_t> history);
  int64_t top_k_candidates(const float* logits, int64_t n);
  static double sum_of(const float* p, int64_t n);
  int64_t top_p_prefix(const float* p, int64_t n, double total) const;
  static int64_t walk(const float* p, int64_t n, double u);
  int32_t top_p_draw(const float* p, int64_t n, double u);
  SamplingParams p_;
  uint64_t state_;
  std::vector<int32_t> idx_;
  std::vector<float> probs_;
  std::vector<uint8_t> seen_;
};

}  // namespace rinfer

#pragma once
// DraftModel: proposes tokens for speculative decoding with a second,
// smaller model of the same tokenizer (`--speculative draft --draft-model`).
// It keeps its own KV cache of the sequence: each step forwards the tokens
// it has not seen (the last verified ones), then drafts k tokens one by one,
// greedily or by sampling (then it keeps each draft's distribution q for
// the acceptance rule). After the target's verification, accepted() says
// how much of the drafted run stays valid in its cache; the rest is
// overwritten by the next step.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model_runner.h"
#include "runtime/sampler.h"

namespace rinfer {

class DraftModel {
 public:
  explicit DraftModel(ModelRunner& runner);
  ~DraftModel();
  DraftModel(const DraftModel&) = delete;
  DraftModel& operator=(const DraftModel&) = delete;

  // A new sequence, sampled with `sampling` (the target's settings; its own
  // random stream). Forgets the cached K/V.
  void start(const SamplingParams& sampling);
  void finish();  // frees the cache blocks

  // Up to k tokens continuing `history` (fewer where the draft's context
  // ends, none once the sequence holds a token outside its vocabulary).
  std::span<const int32_t> propose(std::span<const int32_t> history, int64_t k);
  // The draft's probabilities for drafts()[i] (vocab() of them), or empty
  // when the drafts are deterministic (greedy).
  std::span<const float> q(int64_t i) const;
  int64_t vocab() const { return vocab_; }
  // After verification: `accepted` of the drafts for a history that was
  // `n_history` tokens long were taken.
  void accepted(int64_t n_history, int64_t accepted);
  double seconds() const { return seconds_; }  // in propose(), since start()

 private:
  ModelRunner& runner_;
  const int64_t vocab_;
  Sampler sampler_{SamplingParams{}};
  bool greedy_ = true;
  bool stopped_ = false;  // a token the draft cannot embed
  std::vector<int32_t> blocks_, drafts_, tokens_, hist_;
  std::vector<float> logits_, q_, q_row_;  // q_: k rows of q_row_
  int64_t valid_ = 0;  // history tokens whose K/V the cache holds
  double seconds_ = 0;
};

}  // namespace rinfer

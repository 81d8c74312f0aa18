#include "runtime/model_runner.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rinfer {

ModelRunner::ModelRunner(Model& model, const KVCacheOptions& kv, ThreadPool& pool, Communicator* comm)
    : model_(model), kv_(model.kv_shape(), kv) {
  run_.exec.device = Device::Cpu;
  run_.exec.pool = &pool;
  run_.comm = comm;
}

void ModelRunner::forward(std::span<const BatchItem> batch, float* logits) {
  model_.forward(batch, kv_.view(), logits, run_);
}

SampledToken ModelRunner::sample(float* logits, Sampler& sampler, std::span<const int32_t> history, int top_logprobs) {
  const int64_t V = vocab_size();
  SampledToken out;
  if (top_logprobs < 0) {
    out.id = sampler.sample(logits, V, history);
    return out;
  }
  // Logprobs of the model's own distribution, before the sampler's penalty
  // and temperature change the logits in place.
  scratch_.assign(logits, logits + V);
  const float mx = *std::max_element(scratch_.begin(), scratch_.end());
  double sum = 0;
  for (float l : scratch_) sum += std::exp(double(l - mx));
  const float lse = mx + float(std::log(sum));
  idx_.resize(size_t(V));
  std::iota(idx_.begin(), idx_.end(), 0);
  const auto k = std::min<int64_t>(top_logprobs, V);
  std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), [&](int32_t a, int32_t b) {
    return scratch_[size_t(a)] > scratch_[size_t(b)] || (scratch_[size_t(a)] == scratch_[size_t(b)] && a < b);
  });
  for (int64_t j = 0; j < k; ++j) out.top.push_back({idx_[size_t(j)], scratch_[size_t(idx_[size_t(j)])] - lse});
  out.id = sampler.sample(logits, V, history);
  out.logprob = scratch_[size_t(out.id)] - lse;
  return out;
}

}  // namespace rinfer

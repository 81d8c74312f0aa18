#include "runtime/model_runner.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "parallel/communicator.h"

namespace rinfer {

ModelRunner::ModelRunner(Model& model, const KVCacheOptions& kv, ThreadPool& pool, Communicator* comm)
    : model_(model), kv_(model.kv_shape(), kv) {
  run_.exec.device = Device::Cpu;
  run_.exec.pool = &pool;
  run_.comm = comm;
}

namespace {
// What rank 0 tells the others, first of every message: [kind, items, payload].
enum : int64_t { kForward = 1, kStop = 2 };
}  // namespace

ModelRunner::~ModelRunner() {
  try {
    release_workers();
  } catch (...) {
    // Nothing to report to here; the job's launcher sees the other ranks end.
  }
}

bool ModelRunner::leader() const { return !run_.comm || run_.comm->rank() == 0; }

void ModelRunner::release_workers() {
  if (released_ || !run_.comm || run_.comm->world() == 1 || !leader()) return;
  released_ = true;
  send(kStop, {});
}

// Payload: per item [tokens, start_pos, logit rows, table length], then every
// item's token ids and block table, one int64 each.
void ModelRunner::send(int64_t kind, std::span<const BatchItem> batch) {
  msg_.clear();
  for (const auto& item : batch)
    msg_.insert(msg_.end(), {int64_t(item.tokens.size()), item.start_pos, int64_t(item.logits),
                             int64_t(item.block_table.size())});
  for (const auto& item : batch) {
    msg_.insert(msg_.end(), item.tokens.begin(), item.tokens.end());
    msg_.insert(msg_.end(), item.block_table.begin(), item.block_table.end());
  }
  int64_t head[3] = {kind, int64_t(batch.size()), int64_t(msg_.size())};
  run_.comm->broadcast(head, sizeof head, 0);
  if (!msg_.empty()) run_.comm->broadcast(msg_.data(), int64_t(msg_.size() * sizeof(int64_t)), 0);
}

void ModelRunner::work() {
  if (leader()) return;
  for (;;) {
    int64_t head[3] = {0, 0, 0};
    run_.comm->broadcast(head, sizeof head, 0);
    if (head[0] == kStop) return;
    RINFER_CHECK(head[0] == kForward && head[1] >= 0 && head[2] >= 4 * head[1], "rank ", run_.comm->rank(),
                 ": a malformed message from rank 0");
    msg_.resize(size_t(head[2]));
    run_.comm->broadcast(msg_.data(), head[2] * int64_t(sizeof(int64_t)), 0);
    const size_t n = size_t(head[1]);
    ids_.resize(msg_.size() - 4 * n);
    for (size_t i = 4 * n; i < msg_.size(); ++i) ids_[i - 4 * n] = int32_t(msg_[i]);
    items_.resize(n);
    size_t at = 0;
    for (size_t b = 0; b < n; ++b) {
      const int64_t* d = msg_.data() + 4 * b;
      items_[b].tokens = std::span<const int32_t>(ids_.data() + at, size_t(d[0]));
      at += size_t(d[0]);
      items_[b].start_pos = d[1];
      items_[b].logits = LogitRows(d[2]);
      items_[b].block_table = std::span<const int32_t>(ids_.data() + at, size_t(d[3]));
      at += size_t(d[3]);
    }
    logits_.resize(size_t(Model::logit_rows(items_) * vocab_size()));
    model_.forward(items_, kv_.view(), logits_.data(), run_);
  }
}

void ModelRunner::forward(std::span<const BatchItem> batch, float* logits) {
  if (run_.comm && run_.comm->world() > 1) {
    RINFER_CHECK(leader(), "rank ", run_.comm->rank(), " runs rank 0's batches (work()), it is not driven itself");
    send(kForward, batch);
  }
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

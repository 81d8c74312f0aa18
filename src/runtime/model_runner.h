#pragma once
// ModelRunner: the one place a model runs. It owns the model's KV cache and
// runs the model (owned with its weights by whoever loaded it) on the threads
// and with the communicator of the ranks: batches through Model::forward, and
// a row of logits into a sampled token (with its logprobs). Generator (run,
// validate, bench) and Engine (serve) are its clients.
//
// Over several ranks (a tensor-parallel model, one shard per rank) rank 0's
// runner leads: its forward() first broadcasts the batch (token ids,
// positions, block tables; never activations), and every other rank's
// runner, in work(), runs the same batch on its shard, so that every rank's
// KV cache follows rank 0's scheduler. Only rank 0 samples.
#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace rinfer {

class Communicator;

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t id = -1;
  float logprob = 0;                // of id under the model's distribution (before sampling transforms), when asked
  std::vector<TokenLogprob> top;    // the most likely tokens, when asked
};

class ModelRunner {
 public:
  // The cache is made for model.kv_shape() with `kv`'s options; model and
  // pool must outlive the runner; comm null: a world of one.
  ModelRunner(Model& model, const KVCacheOptions& kv, ThreadPool& pool, Communicator* comm = nullptr);
  // Rank 0 releases the other ranks' work() loops.
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Rank 0 (or a world of one): the runner that is driven; the others work().
  bool leader() const;
  // The other ranks: run rank 0's batches until its runner ends.
  void work();
  // Rank 0: end the other ranks' work() now (the destructor does it too).
  void release_workers();

  const ModelConfig& config() const { return model_.config(); }
  int64_t vocab_size() const { return model_.config().vocab_size; }
  Model& model() { return model_; }
  KVCache& kv() { return kv_; }
  const KVCache& kv() const { return kv_; }

  // Runs the batch: its tokens' K/V into the cache, Model::logit_rows(batch)
  // rows of logits into `logits` (in batch order).
  void forward(std::span<const BatchItem> batch, float* logits);

  // The next token from one row of logits (modified in place by the
  // sampler). top_logprobs >= 0: also the token's logprob and the k most
  // likely tokens' (ties to the lower id), from the logits as the model gave
  // them.
  SampledToken sample(float* logits, Sampler& sampler, std::span<const int32_t> history, int top_logprobs = -1);

 private:
  Model& model_;
  KVCache kv_;
  RunContext run_;
  bool released_ = false;
  // The batch as it travels between ranks, and a worker's copy of it.
  std::vector<int64_t> msg_;
  std::vector<int32_t> ids_;
  std::vector<BatchItem> items_;
  std::vector<float> logits_;
  void send(int64_t kind, std::span<const BatchItem> batch);
  std::vector<float> scratch_;
  std::vector<int32_t> idx_;
};

}  // namespace rinfer

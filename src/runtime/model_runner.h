#pragma once
// ModelRunner: the one place a model runs. It owns the model's KV cache and
// runs the model (owned with its weights by whoever loaded it) on the threads
// and with the communicator of the ranks: batches through Model::forward, and
// a row of logits into a sampled token (with its logprobs). Generator (run,
// validate, bench) and Engine (serve) are its clients.
//
// Over several ranks (parallel/layout.h: pipeline stages of tensor-parallel
// ranks, one shard per rank) rank 0's runner leads: its forward() first
// broadcasts the batch (token ids, positions, block tables; never
// activations), and every other rank's runner, in work(), runs the same
// batch on its shard, so that every rank's KV cache follows rank 0's
// scheduler. Only rank 0 samples.
//
// Pipeline stages: the batch is cut into micro-batches (whole sequences);
// each stage runs them in order, receiving a micro-batch's hidden states
// from the previous stage and sending its own on to the next without
// waiting, so that stage s works on micro-batch i while stage s + 1 works on
// i - 1. The last stage sends the logits to rank 0. Every message carries
// the stages' compute seconds so far, from which rank 0 keeps the bubble
// fraction (PipelineStats).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "parallel/layout.h"
#include "parallel/watchdog.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace rinfer {

class Communicator;
class ExpertRebalancer;

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t id = -1;
  float logprob = 0;                // of id under the model's distribution (before sampling transforms), when asked
  std::vector<TokenLogprob> top;    // the most likely tokens, when asked
};

// Where a runner's rank stands among the others.
struct RunnerParallel {
  Communicator* world = nullptr;   // every rank of the job: batches, hidden states, logits; null: a world of one
  Communicator* tensor = nullptr;  // the stage's tensor-parallel ranks, which the model's layers use; null: world
  Communicator* experts = nullptr;  // the expert-parallel ranks, which MoE layers gather over; null: none
  ExpertRebalancer* rebalancer = nullptr;  // expert parallelism: moves experts after steps (outlives the runner)
  ParallelLayout layout;           // tp x pp (x ep), this rank
  int micro_batches = 1;           // per step, with pipeline stages
  // Over several ranks: a step (a batch's forward, on any rank) that takes
  // longer than this calls on_hang (which ends the job: a peer stopped
  // answering); <= 0 or no on_hang: wait forever.
  double step_timeout_s = 0;
  void (*on_hang)(int rank, double limit_s) = nullptr;
};

// Rank 0's account of the pipeline: over `steps` forward calls of `wall_s`
// seconds in all, stage s computed busy_s[s] seconds. The bubble is the
// share of the stages' time spent waiting.
struct PipelineStats {
  int64_t steps = 0;
  double wall_s = 0;
  std::vector<double> busy_s;
  double bubble_fraction() const;
};

class ModelRunner {
 public:
  // The cache is made for model.kv_shape() with `kv`'s options; model and
  // pool must outlive the runner; comm null: a world of one; otherwise the
  // ranks of one stage, tensor-parallel.
  ModelRunner(Model& model, const KVCacheOptions& kv, ThreadPool& pool, Communicator* comm = nullptr);
  ModelRunner(Model& model, const KVCacheOptions& kv, ThreadPool& pool, const RunnerParallel& parallel);
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
  // The distribution the sampler draws from for this row (speculative
  // sampling compares it with the draft's); same non-finite check.
  void distribution(float* logits, Sampler& sampler, std::span<const int32_t> history, std::vector<float>& probs);

  const ParallelLayout& layout() const { return par_.layout; }
  const ExpertRebalancer* rebalancer() const { return par_.rebalancer; }
  int micro_batches() const { return par_.micro_batches; }
  // Rank 0, with pipeline stages: the bubble so far.
  const PipelineStats& pipeline_stats() const { return stats_; }

  // [begin, end) item ranges of `batch` for `n` micro-batches: contiguous,
  // whole sequences, about equal in tokens; fewer when the batch has fewer
  // sequences.
  static std::vector<std::pair<size_t, size_t>> micro_batch_cuts(std::span<const BatchItem> batch, int n);

 private:
  Model& model_;
  KVCache kv_;
  RunContext run_;
  RunnerParallel par_;
  PipelineStats stats_;
  std::unique_ptr<Watchdog> watchdog_;
  bool released_ = false;
  // The batch as it travels between ranks, and a worker's copy of it.
  std::vector<int64_t> msg_;
  std::vector<int32_t> ids_;
  std::vector<BatchItem> items_;
  std::vector<float> logits_;
  void send(int64_t kind, std::span<const BatchItem> batch);
  void run(std::span<const BatchItem> batch, float* logits);
  void run_pipeline(std::span<const BatchItem> batch, float* logits);
  std::vector<float> stage_in_, stage_out_, stage_logits_;
  std::vector<float> scratch_;
  std::vector<int32_t> idx_;
};

}  // namespace rinfer

#pragma once
// Engine: continuous batching. One background thread runs steps; each step
// asks the scheduler for a batch (decode tokens of running sequences mixed
// with prompt chunks), runs it through the model runner as one batch over the
// paged KV cache, samples a token for every sequence whose chunk reached its
// end, and delivers it to that request's callback. Requests join and leave
// between steps; a finished or cancelled one frees its blocks at once.
//
// submit() and cancel() may be called from any thread. Callbacks run on the
// engine thread: they must be quick and must not call back into the engine
// (queue the event and return; see server/event_queue.h).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "runtime/block_manager.h"
#include "runtime/kv_cache.h"
#include "runtime/model_runner.h"
#include "runtime/scheduler.h"
#include "runtime/sequence.h"

namespace rinfer {

struct EngineOptions {
  SchedulerOptions scheduler;
  int64_t max_model_len = 0;  // prompt + output tokens; 0 (and at most): min(model positions, KV capacity)
  bool prefix_caching = true;
  int64_t max_waiting = 256;  // requests queued but not running at most; submit() refuses beyond
  bool expert_counts = false;  // publish the tokens routed to each expert (EngineStats::expert_counts)
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 16;    // >= 1; the sequence also stops at max_model_len
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // EOS ids
  int priority = 0;               // higher first (priority and preemption schedulers)
  int top_logprobs = -1;          // -1: none; k in [0, 20]: the sampled token's logprob plus the k most likely
};

struct GenerationEvent {
  int64_t request_id = 0;
  int32_t token = -1;  // the new token; -1 on a finish without one (cancelled, error)
  float logprob = 0;   // of `token` under the model's distribution (before sampling transforms), when asked
  std::vector<TokenLogprob> top_logprobs;
  bool finished = false;
  // Set when finished:
  FinishReason finish_reason = FinishReason::None;
  std::string error;
  int64_t n_prompt = 0, n_generated = 0, n_cached_prompt = 0, n_preemptions = 0;
  double ttft_s = 0, e2e_s = 0;  // from submission; ttft_s is 0 when no token came
};

using EventCallback = std::function<void(const GenerationEvent&)>;

// submit() when max_waiting requests are already queued: try again later.
class QueueFullError : public Error {
 public:
  using Error::Error;
};

struct EngineStats {
  int64_t n_running = 0, n_waiting = 0;
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0, block_size = 0;
  int64_t prompt_tokens_total = 0;      // prompt tokens run through the model (recomputation included)
  int64_t generation_tokens_total = 0;  // tokens sampled
  int64_t steps_total = 0, preemptions_total = 0;
  int64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;
  int64_t requests_finished = 0;
  // Speculative decoding: drafts verified, and those accepted.
  int64_t spec_draft_tokens_total = 0, spec_accepted_tokens_total = 0;
  // Pipeline stages (more than one): the runner's account of the bubble.
  int pipeline_stages = 1;
  int micro_batches = 1;
  double pipeline_wall_s = 0, pipeline_busy_s = 0;  // forward seconds; compute seconds summed over the stages
  double pipeline_bubble_fraction = 0;
  // Expert parallelism: per MoE layer (by layer index; empty rows for dense
  // layers), the (token, expert) pairs each rank computed.
  std::vector<std::vector<uint64_t>> expert_rank_tokens;
  // Online rebalancing (--rebalance-every): looks that moved experts,
  // physical experts moved, and per MoE layer the balancedness measured over
  // the last window (layer -> mean / max pairs per rank).
  // With EngineOptions::expert_counts: per layer, tokens routed to each
  // expert so far (empty rows for dense layers).
  std::vector<std::vector<uint64_t>> expert_counts;
  bool rebalancing = false;
  int64_t expert_rebalances = 0, experts_moved = 0;
  std::map<int64_t, double> expert_window_balancedness;
};

class Engine {
 public:
  // Starts the engine thread. The KV cache must be unused; the engine owns
  // it (and the model's forward) until destroyed.
  Engine(ModelRunner& runner, const EngineOptions& opts);
  // Stops the thread; requests still queued or running get a Cancelled event.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Throws rinfer::Error (one line) for a request the engine cannot run:
  // empty prompt, ids outside the vocabulary, no room for one new token
  // within max_model_len, bad sampling parameters.
  void check(const GenerationRequest& req) const;
  // Queues a request; events arrive on `on_event`, the last one with
  // finished = true. Returns its id. Throws as check(), or QueueFullError.
  int64_t submit(GenerationRequest req, EventCallback on_event);
  // Ends a request at the next step boundary (its blocks are freed then);
  // it gets a final event with FinishReason::Cancelled. Unknown or finished
  // ids are ignored.
  void cancel(int64_t id);

  EngineStats stats() const;  // as of the last step
  int64_t max_model_len() const { return max_model_len_; }
  int64_t vocab_size() const { return vocab_; }
  const EngineOptions& options() const { return opts_; }

 private:
  struct Live {
    std::unique_ptr<Sequence> seq;
    EventCallback on_event;
  };
  void loop();
  bool step();  // false when nothing could be scheduled
  void take_inbox();
  // Samples and delivers the next token; false when that finished the
  // sequence (it is gone then).
  bool sample(Sequence& seq, float* logits);
  void verify(Sequence& seq, int64_t n_drafts, float* logits);
  void finish(int64_t id, FinishReason reason, const std::string& error = "");
  void emit(Live& live, GenerationEvent& ev);
  void publish_stats();

  ModelRunner& runner_;
  EngineOptions opts_;
  int64_t max_model_len_ = 0;
  int64_t vocab_ = 0;

  // Engine thread only.
  BlockManager blocks_;
  Scheduler scheduler_;
  std::unordered_map<int64_t, Live> live_;
  std::vector<BatchItem> batch_;
  std::vector<float> logits_;
  EngineStats counters_;

  // Shared with submitters, under mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Live> inbox_;
  std::vector<int64_t> cancels_;
  EngineStats published_;
  int64_t next_id_ = 1;
  uint64_t next_arrival_ = 0;
  bool stop_ = false;

  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace rinfer

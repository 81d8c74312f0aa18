#pragma once
// Model: a runnable architecture. forward() takes a batch of sequences, each
// a run of new tokens at consecutive positions with its own KV block table,
// so prefill (many tokens) and decode (one token) of many sequences go
// through the same call.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/paged_kv.h"
#include "model/model_config.h"
#include "ops/exec_context.h"
#include "parallel/expert_placement.h"

namespace rinfer {

// Which of a sequence's new tokens get a row of logits: the last one (the
// token to sample next), all (teacher-forced scoring), or none (a prompt
// chunk before the last: only its K/V matter, and the output layer, the
// largest matrix of a small model, is not read for it).
enum class LogitRows : uint8_t { Last, All, None };

struct BatchItem {
  std::span<const int32_t> tokens;       // new tokens of this sequence
  int64_t start_pos = 0;                 // position of tokens[0] (= tokens already cached)
  std::span<const int32_t> block_table;  // must cover start_pos + tokens.size() positions
  LogitRows logits = LogitRows::Last;
};

// The KV cache as a forward pass sees it: each layer's pools (the runtime's
// KVCache owns them).
struct KvView {
  std::span<const PagedKV> layers;
  int block_size = 16;
};

class Communicator;

// Where a forward pass runs: the ops' device and threads, and the
// communicator of the ranks that hold the model's other shards.
struct RunContext {
  ExecContext exec;
  Communicator* comm = nullptr;  // the stage's tensor-parallel ranks; null: a world of one
  Communicator* expert_comm = nullptr;  // the expert-parallel ranks; null: a world of one
  // A pipeline stage's input from the previous stage (all but the first)
  // and its output for the next (all but the last): hidden states [tokens,
  // hidden] of the batch.
  const float* stage_input = nullptr;
  float* stage_output = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual KVCacheShape kv_shape() const = 0;
  // Number of logit rows forward() writes for this batch.
  static int64_t logit_rows(std::span<const BatchItem> batch);
  // Runs the batch, writing K/V of the new tokens into `kv` and logits
  // [logit_rows, vocab_size] (in batch order) into `logits` (untouched, and
  // may be null, when logit_rows is 0).
  virtual void forward(std::span<const BatchItem> batch, const KvView& kv, float* logits, const RunContext& run) = 0;
  // Bytes of weights read to decode one token (all matrices once; for MoE
  // the router, top-k and shared experts).
  virtual uint64_t weight_bytes_per_token() const = 0;
  // Tokens routed to each expert so far, per layer (empty rows for dense
  // layers, empty for dense models): the load data for expert placement.
  virtual std::vector<std::vector<uint64_t>> expert_counts() const { return {}; }
  // Expert parallelism: the (token, expert) pairs each rank computed so far,
  // per layer (empty rows for dense layers; empty without).
  virtual std::vector<std::vector<uint64_t>> expert_rank_tokens() const { return {}; }
  // Expert parallelism: the MoE layers `plan` lists (plan.layers) move to
  // its placement (same experts, same ranks) between two forward passes,
  // reading the experts this rank gains and dropping those it loses.
  virtual void place_experts(const ExpertPlan& plan);
};

}  // namespace rinfer

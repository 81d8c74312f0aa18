#pragma once
// Sequence: one generation (a request, or one of its n choices) as the
// serving engine sees it: its tokens (prompt, then generated ids), how many
// of them already have K/V in the cache, its block table and its sampler.
// The scheduler moves it between waiting and running; the block manager
// gives it blocks; the engine appends the tokens it samples.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/sampler.h"

namespace rinfer {

enum class SequenceStatus { Waiting, Running, Finished };

// Why a sequence ended. Stop: an EOS id (stop strings are the server's and
// arrive as a cancellation it asked for); Length: max_new_tokens or the
// model length; Cancelled: the client went away or asked; Error: the engine
// failed the step it was in.
enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);

struct Sequence {
  using Clock = std::chrono::steady_clock;

  int64_t id = 0;
  int priority = 0;       // higher is served first (priority and preemption schedulers)
  uint64_t arrival = 0;   // submission order: ties within a priority, and "newest" for preemption
  SequenceStatus status = SequenceStatus::Waiting;

  std::vector<int32_t> tokens;  // prompt followed by the generated ids
  int64_t n_prompt = 0;
  int64_t max_len = 0;          // stop (Length) when tokens reach this many: min(prompt + max_new_tokens, max_model_len)
  std::vector<int32_t> stop_ids;
  bool reserve_full = false;    // fifo / priority: blocks for max_len are taken at admission, so it is never preempted

  // K/V state. n_computed tokens (a prefix of `tokens`) have K/V in the
  // cache, prefix-cache hits included; block_table covers at least them.
  int64_t n_computed = 0;
  std::vector<int32_t> block_table;
  int64_t n_hashed_blocks = 0;  // leading full blocks already offered to the prefix cache
  uint64_t last_block_hash = 0; // chain hash of block n_hashed_blocks - 1

  // Speculative decoding (serve --speculative ngram): this step's last
  // token and drafts, and the draft length the back-off allows next.
  std::vector<int32_t> verify_tokens;
  int64_t draft_len = 0;
  int64_t n_drafted = 0, n_accepted = 0;

  std::unique_ptr<Sampler> sampler;  // kept across preemption, so resumed output is unchanged
  int top_logprobs = -1;             // -1: no logprobs; k >= 0: chosen token's plus k alternatives

  // Statistics, reported with the last event.
  int64_t n_cached_prompt = 0;  // prompt tokens served by the prefix cache on first admission
  int64_t n_preemptions = 0;
  Clock::time_point submitted, first_token;

  int64_t n_tokens() const { return int64_t(tokens.size()); }
  int64_t n_generated() const { return n_tokens() - n_prompt; }
  // Tokens still to run through the model before the next sample: the rest
  // of the prompt (or of prompt + generated ids after a preemption), or the
  // last sampled token.
  int64_t n_uncomputed() const { return n_tokens() - n_computed; }
  bool finished() const { return status == SequenceStatus::Finished; }
};

}  // namespace rinfer

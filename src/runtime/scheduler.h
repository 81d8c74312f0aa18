#pragma once
// Scheduler: decides, before every engine step, which sequences run and how
// many of their tokens, under a token budget (max_batch_tokens) and a seat
// limit (max_num_seqs), getting KV blocks from the block manager.
//
// One step, in order:
//   1. decode: every running sequence that has a token to sample next gets
//      its one token, so a long prompt never stalls the others;
//   2. running sequences still in their prompt get the next chunk of it
//      (chunked prefill), as far as budget and free blocks allow;
//   3. waiting sequences are admitted, in policy order, while budget, seats
//      and blocks last; a sequence that does not fit stops admission
//      (no overtaking: the queue order is the policy's promise).
//
// Policies:
//   fifo        admission in arrival order; blocks for the whole sequence
//               (prompt + max new tokens) are taken at admission, so a
//               running sequence never runs out and is never preempted.
//   priority    as fifo, but admission by priority (higher first), arrival
//               order within a priority.
//   preemption  admission by priority, blocks taken as needed (more
//               sequences fit); when a decode needs a block and none is
//               left, the lowest-priority, newest running sequence is
//               preempted: its blocks are freed and it waits to be
//               recomputed later, keeping its tokens and sampler state, so
//               its output does not change.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/block_manager.h"
#include "runtime/sequence.h"

namespace rinfer {

enum class SchedulerPolicy { Fifo, Priority, Preemption };
SchedulerPolicy parse_scheduler_policy(const std::string& name);  // throws rinfer::Error
const char* scheduler_policy_name(SchedulerPolicy p);

// Speculative decoding in serving: a decoding sequence's step also carries
// up to num_tokens drafts from prompt lookup (runtime/prompt_lookup.h),
// verified by the engine in the same forward. It backs off: per sequence,
// the draft length halves after a step whose drafts all missed and grows
// by one after a step whose drafts all hit; with more than max_batch
// sequences running no one drafts (the step is then compute-bound, and
// rejected rows cost as much as accepted ones); drafts use only the step's
// token budget left after every decode's one token.
struct SchedulerSpeculation {
  int64_t num_tokens = 0;  // 0: off
  int64_t ngram_max = 3;
  int64_t max_batch = 8;
};

struct SchedulerOptions {
  SchedulerPolicy policy = SchedulerPolicy::Fifo;
  int64_t max_num_seqs = 64;        // running sequences at most
  int64_t max_batch_tokens = 2048;  // tokens per step at most (>= max_num_seqs)
  SchedulerSpeculation speculative;
  void validate() const;
};

// Run tokens [seq->n_computed, seq->n_computed + n_tokens) of seq this step;
// with n_drafts > 0 the chunk is seq->verify_tokens: the last token and its
// drafts.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t n_tokens = 0;
  int64_t n_drafts = 0;
  // True when the chunk reaches the sequence's last token: its logits are sampled.
  bool samples() const { return seq->n_computed + n_tokens - n_drafts == seq->n_tokens(); }
};

struct Schedule {
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> preempted;  // moved back to waiting during this call
  int64_t n_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& opts, BlockManager& blocks);

  const SchedulerOptions& options() const { return opts_; }
  // Queue a new sequence (status Waiting, no blocks).
  void add(Sequence* seq);
  Schedule schedule();
  // Remove a sequence wherever it is, free its blocks, mark it Finished.
  void finish(Sequence* seq);

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  int64_t n_waiting() const { return int64_t(waiting_.size()); }
  int64_t n_running() const { return int64_t(running_.size()); }
  int64_t n_preemptions() const { return n_preemptions_; }
  // Prompt tokens offered to the prefix cache on first admission, and how many it served.
  int64_t prefix_queried_tokens() const { return prefix_queried_; }
  int64_t prefix_hit_tokens() const { return prefix_hits_; }

 private:
  bool before(const Sequence* a, const Sequence* b) const;  // policy order
  void insert_sorted(std::vector<Sequence*>& q, Sequence* seq);
  void preempt(Sequence* seq);
  bool reserves_full() const { return opts_.policy != SchedulerPolicy::Preemption; }
  void schedule_decodes(Schedule& s, int64_t& budget);
  void schedule_prefill_chunks(Schedule& s, int64_t& budget);
  void admit_waiting(Schedule& s, int64_t& budget);

  SchedulerOptions opts_;
  BlockManager& blocks_;
  std::vector<Sequence*> waiting_;  // policy order; preempted sequences keep their place by arrival
  std::vector<Sequence*> running_;  // policy order; the back is preempted first
  int64_t n_preemptions_ = 0;
  int64_t prefix_queried_ = 0, prefix_hits_ = 0;
};

}  // namespace rinfer

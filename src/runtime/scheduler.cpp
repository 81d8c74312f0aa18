#include "runtime/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/prompt_lookup.h"

namespace rinfer {

SchedulerPolicy parse_scheduler_policy(const std::string& name) {
  if (name == "fifo") return SchedulerPolicy::Fifo;
  if (name == "priority") return SchedulerPolicy::Priority;
  if (name == "preemption") return SchedulerPolicy::Preemption;
  fail("unknown scheduler \"", name, "\"; expected fifo, priority or preemption");
}

const char* scheduler_policy_name(SchedulerPolicy p) {
  switch (p) {
    case SchedulerPolicy::Fifo: return "fifo";
    case SchedulerPolicy::Priority: return "priority";
    case SchedulerPolicy::Preemption: return "preemption";
  }
  return "fifo";
}

void SchedulerOptions::validate() const {
  RINFER_CHECK(speculative.num_tokens >= 0 && speculative.num_tokens <= 16,
               "--num-speculative-tokens must be in [1, 16], got ", speculative.num_tokens);
  RINFER_CHECK(speculative.ngram_max >= 1, "--ngram-max must be >= 1, got ", speculative.ngram_max);
  RINFER_CHECK(speculative.max_batch >= 1, "--speculative-max-batch must be >= 1, got ", speculative.max_batch);
  RINFER_CHECK(max_num_seqs >= 1, "--max-num-seqs must be >= 1, got ", max_num_seqs);
  // Every running sequence must be able to decode in every step, or the
  // ones at the back of the order would starve.
  RINFER_CHECK(max_batch_tokens >= max_num_seqs, "--max-batch-tokens (", max_batch_tokens,
               ") must be >= --max-num-seqs (", max_num_seqs, ")");
}

Scheduler::Scheduler(const SchedulerOptions& opts, BlockManager& blocks) : opts_(opts), blocks_(blocks) {
  opts_.validate();
}

bool Scheduler::before(const Sequence* a, const Sequence* b) const {
  if (opts_.policy != SchedulerPolicy::Fifo && a->priority != b->priority) return a->priority > b->priority;
  return a->arrival < b->arrival;
}

void Scheduler::insert_sorted(std::vector<Sequence*>& q, Sequence* seq) {
  auto it = std::upper_bound(q.begin(), q.end(), seq, [&](const Sequence* a, const Sequence* b) { return before(a, b); });
  q.insert(it, seq);
}

void Scheduler::add(Sequence* seq) {
  RINFER_ASSERT(seq->block_table.empty() && seq->n_uncomputed() > 0);
  seq->status = SequenceStatus::Waiting;
  insert_sorted(waiting_, seq);
}

void Scheduler::finish(Sequence* seq) {
  for (auto* q : {&running_, &waiting_}) {
    auto it = std::find(q->begin(), q->end(), seq);
    if (it != q->end()) q->erase(it);
  }
  blocks_.free(*seq);
  seq->status = SequenceStatus::Finished;
}

void Scheduler::preempt(Sequence* seq) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  blocks_.free(*seq);  // its computed full blocks stay cached: resuming may find them again
  seq->status = SequenceStatus::Waiting;
  ++seq->n_preemptions;
  ++n_preemptions_;
  insert_sorted(waiting_, seq);
}

Schedule Scheduler::schedule() {
  Schedule s;
  int64_t budget = opts_.max_batch_tokens;
  schedule_decodes(s, budget);
  schedule_prefill_chunks(s, budget);
  // After a preemption the pool is tight: admitting more now would only
  // preempt again next step.
  if (s.preempted.empty()) admit_waiting(s, budget);
  for (const auto& c : s.chunks) s.n_tokens += c.n_tokens;
  return s;
}

void Scheduler::schedule_decodes(Schedule& s, int64_t& budget) {
  const SchedulerSpeculation& spec = opts_.speculative;
  int64_t decodes = 0;  // still to be given their one token
  for (const Sequence* seq : running_) decodes += seq->n_uncomputed() == 1;
  const bool drafting = spec.num_tokens > 0 && int64_t(running_.size()) <= spec.max_batch;
  // running_ is in policy order and only sequences behind the current one
  // are preempted, so a sequence already given work this step is never a
  // victim; the current one may be its own victim.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* seq = running_[i];
    if (seq->n_uncomputed() != 1) continue;
    --decodes;
    std::vector<int32_t> drafts;
    if (drafting) {
      if (seq->draft_len == 0) seq->draft_len = spec.num_tokens;
      // The token after the last draft must still fit max_len; the budget
      // keeps one token for every decode after this one.
      const int64_t k = std::min({seq->draft_len, seq->max_len - seq->n_tokens() - 1, budget - 1 - decodes});
      if (k > 0) drafts = prompt_lookup_draft(seq->tokens, k, spec.ngram_max);
      if (!drafts.empty() && !blocks_.can_allocate(*seq, seq->n_computed + 1 + int64_t(drafts.size())))
        drafts.clear();  // no spare blocks: never preempt anyone for a guess
    }
    const int64_t target = seq->n_computed + 1 + int64_t(drafts.size());
    bool self_preempted = false;
    while (!blocks_.can_allocate(*seq, target)) {
      // fifo / priority reserved every block at admission, so this is the
      // preemption scheduler (or a bug, which the allocate below reports).
      if (reserves_full()) break;
      Sequence* victim = running_.back();
      preempt(victim);
      s.preempted.push_back(victim);
      if (victim == seq) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // it was the last one
    blocks_.allocate(*seq, target);
    const int64_t n = 1 + int64_t(drafts.size());
    if (!drafts.empty()) {
      seq->verify_tokens.assign(1, seq->tokens.back());
      seq->verify_tokens.insert(seq->verify_tokens.end(), drafts.begin(), drafts.end());
    }
    s.chunks.push_back({seq, n, n - 1});
    budget -= n;
  }
}

void Scheduler::schedule_prefill_chunks(Schedule& s, int64_t& budget) {
  // Blocks for the whole prompt were taken at admission, so a chunk only
  // needs budget.
  for (Sequence* seq : running_) {
    if (budget <= 0) break;
    if (seq->n_uncomputed() <= 1) continue;
    const int64_t n = std::min(seq->n_uncomputed(), budget);
    blocks_.allocate(*seq, seq->n_computed + n);
    s.chunks.push_back({seq, n});
    budget -= n;
  }
}

void Scheduler::admit_waiting(Schedule& s, int64_t& budget) {
  while (!waiting_.empty() && budget > 0 && int64_t(running_.size()) < opts_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const bool first_admission = seq->n_preemptions == 0;
    if (seq->block_table.empty()) blocks_.attach_cached_prefix(*seq);
    // fifo / priority: every position the sequence can reach (the last
    // sampled token is never fed back); preemption: its current tokens, so
    // that later prompt chunks need no blocks and only decodes can run out.
    const int64_t need = reserves_full() ? std::max(seq->n_tokens(), seq->max_len - 1) : seq->n_tokens();
    if (!blocks_.can_allocate(*seq, need)) {
      blocks_.free(*seq);  // give back the cached blocks it was about to reuse
      break;
    }
    blocks_.allocate(*seq, need);
    if (first_admission) {
      seq->n_cached_prompt = seq->n_computed;
      prefix_queried_ += seq->n_prompt;
      prefix_hits_ += seq->n_computed;
    }
    waiting_.erase(waiting_.begin());
    seq->status = SequenceStatus::Running;
    insert_sorted(running_, seq);
    const int64_t n = std::min(seq->n_uncomputed(), budget);
    s.chunks.push_back({seq, n});
    budget -= n;
  }
}

}  // namespace rinfer

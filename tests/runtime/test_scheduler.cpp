#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/error.h"

namespace rinfer {
namespace {

struct Harness {
  KVCache kv;
  BlockManager bm;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
  Harness(SchedulerOptions o, int64_t n_blocks, int block_size = 4)
      : kv({1, 1, 8}, KVCacheOptions{block_size, n_blocks, DType::F32}), bm(kv, false), sched(o, bm) {}
  Sequence* add(int64_t n_prompt, int64_t max_new, int priority = 0) {
    auto s = std::make_unique<Sequence>();
    s->id = int64_t(seqs.size());
    s->arrival = uint64_t(seqs.size());
    s->priority = priority;
    s->tokens.assign(size_t(n_prompt), 5);
    s->n_prompt = n_prompt;
    s->max_len = n_prompt + max_new;
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  // What the engine does after a step: mark computed, append a sampled token.
  Schedule step() {
    Schedule s = sched.schedule();
    for (auto& c : s.chunks) {
      const bool samples = c.samples();
      c.seq->n_computed += c.n_tokens;
      if (samples) c.seq->tokens.push_back(7);
    }
    return s;
  }
};

SchedulerOptions opts(SchedulerPolicy p, int64_t seqs, int64_t tokens) {
  SchedulerOptions o;
  o.policy = p;
  o.max_num_seqs = seqs;
  o.max_batch_tokens = tokens;
  return o;
}

TEST(Scheduler, ChunksLongPromptsAndDecodesFirst) {
  Harness h(opts(SchedulerPolicy::Fifo, 4, 8), 64);
  Sequence* a = h.add(3, 10);
  auto s = h.step();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].n_tokens, 3);
  Sequence* b = h.add(20, 10);  // longer than the budget
  s = h.step();
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].seq, a) << "the decode goes first";
  EXPECT_EQ(s.chunks[0].n_tokens, 1);
  EXPECT_EQ(s.chunks[1].seq, b);
  EXPECT_EQ(s.chunks[1].n_tokens, 7);
  EXPECT_EQ(s.n_tokens, 8);
  s = h.step();
  EXPECT_EQ(s.chunks[1].n_tokens, 7);
  s = h.step();
  EXPECT_EQ(s.chunks[1].n_tokens, 6) << "the rest of the prompt";
  EXPECT_EQ(b->n_generated(), 1);
}

TEST(Scheduler, RespectsMaxNumSeqsAndFifoOrder) {
  Harness h(opts(SchedulerPolicy::Fifo, 2, 64), 64);
  Sequence* a = h.add(2, 5, 0);
  Sequence* b = h.add(2, 5, 9);  // priority is ignored by fifo
  Sequence* c = h.add(2, 5, 0);
  auto s = h.step();
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].seq, a);
  EXPECT_EQ(s.chunks[1].seq, b);
  EXPECT_EQ(h.sched.n_waiting(), 1);
  h.sched.finish(a);
  s = h.step();
  EXPECT_EQ(s.chunks.back().seq, c);
}

TEST(Scheduler, PriorityAdmitsHigherFirst) {
  Harness h(opts(SchedulerPolicy::Priority, 1, 64), 64);
  h.add(2, 5, 0);
  Sequence* hi = h.add(2, 5, 3);
  h.add(2, 5, 3);
  auto s = h.step();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq, hi) << "highest priority, earliest within it";
}

TEST(Scheduler, FifoReservesWholeSequencesSoNothingIsPreempted) {
  // 8 blocks of 4 = 32 tokens; each sequence may reach 4 + 12 = 16 tokens (15 positions, 4 blocks).
  Harness h(opts(SchedulerPolicy::Fifo, 8, 64), 8);
  for (int i = 0; i < 3; ++i) h.add(4, 12);
  auto s = h.step();
  EXPECT_EQ(s.chunks.size(), 2u) << "only two fit their whole length";
  for (int i = 0; i < 40; ++i) {
    s = h.step();
    EXPECT_TRUE(s.preempted.empty());
    for (auto& seq : h.seqs)
      if (!seq->finished() && seq->n_tokens() >= seq->max_len) h.sched.finish(seq.get());
  }
  EXPECT_EQ(h.sched.n_preemptions(), 0);
  EXPECT_FALSE(h.sched.has_work());
}

TEST(Scheduler, PreemptsTheLowestPriorityNewestWhenBlocksRunOut) {
  Harness h(opts(SchedulerPolicy::Preemption, 8, 64), 6);
  Sequence* old_lo = h.add(4, 40, 0);
  Sequence* hi = h.add(4, 40, 5);
  Sequence* new_lo = h.add(4, 40, 0);
  h.step();  // all three admitted: one block each
  EXPECT_EQ(h.sched.n_running(), 3);
  std::vector<Sequence*> victims;
  for (int i = 0; i < 12 && victims.empty(); ++i) {
    auto s = h.step();
    victims = s.preempted;
  }
  ASSERT_FALSE(victims.empty());
  EXPECT_EQ(victims[0], new_lo);
  EXPECT_EQ(new_lo->status, SequenceStatus::Waiting);
  EXPECT_EQ(new_lo->n_computed, 0) << "its K/V is recomputed on resume";
  EXPECT_GT(new_lo->n_generated(), 0) << "but its tokens are kept";
  EXPECT_EQ(hi->status, SequenceStatus::Running);
  EXPECT_EQ(old_lo->status, SequenceStatus::Running);
}

TEST(Scheduler, RejectsABudgetSmallerThanTheSeats) {
  KVCache kv({1, 1, 8}, KVCacheOptions{4, 4, DType::F32});
  BlockManager bm(kv, false);
  EXPECT_THROW(Scheduler(opts(SchedulerPolicy::Fifo, 8, 4), bm), Error);
  EXPECT_THROW(parse_scheduler_policy("lifo"), Error);
}

}  // namespace
}  // namespace rinfer

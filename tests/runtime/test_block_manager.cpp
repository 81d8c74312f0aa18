#include "runtime/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"

namespace rinfer {
namespace {

KVCache make_kv(int64_t n_blocks, int block_size = 4) {
  KVCacheOptions o;
  o.block_size = block_size;
  o.n_blocks = n_blocks;
  return KVCache({1, 1, 8}, o);
}

Sequence seq_of(std::vector<int32_t> tokens) {
  Sequence s;
  s.tokens = std::move(tokens);
  s.n_prompt = int64_t(s.tokens.size());
  return s;
}

// Allocates for all tokens and marks them computed, as an engine step would.
void compute_all(BlockManager& bm, Sequence& s) {
  bm.allocate(s, s.n_tokens());
  s.n_computed = s.n_tokens();
  bm.register_computed(s);
}

TEST(BlockManager, SharesFullBlocksOfAnIdenticalPrefix) {
  auto kv = make_kv(10);
  BlockManager bm(kv, true);
  auto a = seq_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // blocks [1-4] [5-8] [9 10]
  EXPECT_EQ(bm.attach_cached_prefix(a), 0);
  compute_all(bm, a);
  EXPECT_EQ(bm.n_used(), 3);
  auto b = seq_of({1, 2, 3, 4, 5, 6, 7, 8, 42});
  EXPECT_EQ(bm.attach_cached_prefix(b), 8);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  compute_all(bm, b);
  EXPECT_EQ(bm.n_used(), 4) << "b added one block of its own";
  // A different first block shares nothing, even with the same second block.
  auto c = seq_of({9, 2, 3, 4, 5, 6, 7, 8, 1});
  EXPECT_EQ(bm.attach_cached_prefix(c), 0);
  bm.free(a);
  bm.free(b);
  bm.free(c);
  EXPECT_EQ(bm.n_used(), 0);
  EXPECT_EQ(bm.n_available(), 10);
  EXPECT_EQ(bm.n_cached_unused(), 2) << "the two full blocks stay cached";
}

TEST(BlockManager, NeverServesTheLastTokenFromTheCache) {
  auto kv = make_kv(10);
  BlockManager bm(kv, true);
  auto a = seq_of({1, 2, 3, 4, 5, 6, 7, 8});
  bm.attach_cached_prefix(a);
  compute_all(bm, a);
  auto b = seq_of({1, 2, 3, 4, 5, 6, 7, 8});  // same 8 tokens: its logits still need the 8th
  EXPECT_EQ(bm.attach_cached_prefix(b), 4);
}

TEST(BlockManager, EvictsLeastRecentlyUsedCachedBlocksWhenFull) {
  auto kv = make_kv(4);
  BlockManager bm(kv, true);
  auto a = seq_of({1, 2, 3, 4, 5, 6, 7, 8, 0});
  bm.attach_cached_prefix(a);
  compute_all(bm, a);  // 3 blocks, 2 of them cached once freed
  bm.free(a);
  auto b = seq_of({11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25});  // 4 blocks: evicts both
  bm.attach_cached_prefix(b);
  ASSERT_TRUE(bm.can_allocate(b, b.n_tokens()));
  compute_all(bm, b);
  EXPECT_EQ(bm.n_available(), 0);
  bm.free(b);
  auto a2 = seq_of({1, 2, 3, 4, 5, 6, 7, 8, 0});
  EXPECT_EQ(bm.attach_cached_prefix(a2), 0) << "a's blocks were evicted";
  EXPECT_THROW(
      {
        auto big = seq_of(std::vector<int32_t>(40, 3));
        bm.allocate(big, 40);
      },
      Error);
  bm.free(a2);
}

TEST(BlockManager, OffWhenPrefixCachingIsDisabled) {
  auto kv = make_kv(6);
  BlockManager bm(kv, false);
  auto a = seq_of({1, 2, 3, 4, 5, 6, 7, 8, 9});
  bm.attach_cached_prefix(a);
  compute_all(bm, a);
  auto b = seq_of({1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(bm.attach_cached_prefix(b), 0);
  bm.free(a);
  EXPECT_EQ(bm.n_cached_unused(), 0);
  EXPECT_EQ(kv.n_free_blocks(), 6);
}

TEST(BlockManager, ChainHashDependsOnEveryEarlierToken) {
  const int32_t x[4] = {1, 2, 3, 4};
  EXPECT_NE(BlockManager::chain_hash(0, x, 4), BlockManager::chain_hash(1, x, 4));
  EXPECT_EQ(BlockManager::chain_hash(5, x, 4), BlockManager::chain_hash(5, x, 4));
  const int32_t y[4] = {1, 2, 4, 3};
  EXPECT_NE(BlockManager::chain_hash(0, x, 4), BlockManager::chain_hash(0, y, 4));
}

}  // namespace
}  // namespace rinfer

#include "runtime/kv_cache.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"

namespace rinfer {
namespace {

TEST(KVCache, ReserveAndReleaseBlocks) {
  KVCacheOptions o;
  o.block_size = 16;
  o.n_blocks = 10;
  KVCache kv({2, 2, 8}, o);
  EXPECT_EQ(kv.capacity_tokens(), 160);
  EXPECT_EQ(kv.bytes_per_token(), size_t(2 * 2 * 2 * 8 * 4));
  std::vector<int32_t> a, b;
  kv.reserve(a, 1);
  EXPECT_EQ(a.size(), 1u);
  kv.reserve(a, 16);
  EXPECT_EQ(a.size(), 1u);
  kv.reserve(a, 17);
  EXPECT_EQ(a.size(), 2u);
  kv.reserve(b, 100);
  EXPECT_EQ(b.size(), 7u);
  EXPECT_EQ(kv.n_free_blocks(), 1);
  std::set<int32_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 9u) << "a block was handed out twice";
  // Exhaustion is an error and leaves the table unchanged.
  std::vector<int32_t> c;
  EXPECT_THROW(kv.reserve(c, 33), Error);
  EXPECT_TRUE(c.empty());
  EXPECT_FALSE(kv.can_reserve(c, 33));
  EXPECT_TRUE(kv.can_reserve(c, 16));
  kv.release(a);
  kv.release(b);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(kv.n_free_blocks(), 10);
}

TEST(KVCache, LayersDoNotOverlap) {
  KVCacheOptions o;
  o.block_size = 4;
  o.n_blocks = 3;
  o.dtype = DType::BF16;
  KVCache kv({3, 2, 8}, o);
  auto l0 = kv.layer(0), l1 = kv.layer(1), l2 = kv.layer(2);
  const size_t per = 3 * 4 * 2 * 8 * 2;
  EXPECT_EQ(static_cast<uint8_t*>(l0.v) - static_cast<uint8_t*>(l0.k), ptrdiff_t(per));
  EXPECT_EQ(static_cast<uint8_t*>(l1.k) - static_cast<uint8_t*>(l0.k), ptrdiff_t(2 * per));
  EXPECT_EQ(static_cast<uint8_t*>(l2.v) + per, static_cast<uint8_t*>(l0.k) + kv.bytes());
}

TEST(KVCache, RejectsBadOptions) {
  KVCacheOptions o;
  o.n_blocks = 0;
  EXPECT_THROW(KVCache({1, 1, 8}, o), Error);
  o.n_blocks = 1;
  o.block_size = 0;
  EXPECT_THROW(KVCache({1, 1, 8}, o), Error);
  o.block_size = 16;
  o.dtype = DType::I8;
  EXPECT_THROW(KVCache({1, 1, 8}, o), Error);
}

}  // namespace
}  // namespace rinfer

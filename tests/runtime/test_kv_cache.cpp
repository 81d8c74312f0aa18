#include "kernels/cpu/ops.h"
#include "runtime/kv_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

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
  o.dtype = DType::U8;
  EXPECT_THROW(KVCache({1, 1, 8}, o), Error);
  // INT8 is supported, except for latent (MLA) caches without V.
  o.dtype = DType::I8;
  EXPECT_NO_THROW(KVCache({1, 1, 8}, o));
  EXPECT_THROW(KVCache({1, 1, 8, 0}, o), Error);
}

TEST(KVCache, Int8HasPerSlotPerHeadScales) {
  KVCacheOptions o;
  o.block_size = 4;
  o.n_blocks = 3;
  o.dtype = DType::I8;
  const int64_t layers = 2, heads = 3, hd = 8;
  KVCache kv({layers, heads, hd}, o);
  // int8 values + one f32 scale per head, for K and V.
  EXPECT_EQ(kv.bytes_per_token(), size_t(layers * heads * 2 * (hd + 4)));
  const size_t slots = 3 * 4;
  EXPECT_EQ(kv.bytes(), size_t(layers) * slots * heads * 2 * (hd + 4));
  auto l0 = kv.layer(0), l1 = kv.layer(1);
  ASSERT_NE(l0.k_scale, nullptr);
  ASSERT_NE(l0.v_scale, nullptr);
  EXPECT_EQ(l0.v_scale - l0.k_scale, ptrdiff_t(slots * heads));
  EXPECT_EQ(l1.k_scale - l0.k_scale, ptrdiff_t(2 * slots * heads));
  // A stored token round-trips within the quantization error.
  std::vector<float> k(heads * hd), v(heads * hd), out(hd), scratch(16);
  for (size_t i = 0; i < k.size(); ++i) k[i] = float(i % 7) - 3.0f, v[i] = 0.25f * float(i % 5);
  kernels::cpu::store_kv(l1, 5, k.data(), v.data());
  // head-major pools: head h of slot s is row (h * n_blocks + s / block_size) * block_size + s % block_size
  ASSERT_EQ(l1.n_blocks, 3);
  const int64_t row = (0 * 3 + 5 / 4) * 4 + 5 % 4;
  EXPECT_FLOAT_EQ(l1.k_scale[row], 3.0f / 127);
  const int8_t* k8 = static_cast<const int8_t*>(l1.k) + row * hd;  // head 0: -3 -2 -1 0 1 2 3 -3
  EXPECT_EQ(k8[0], -127);
  EXPECT_EQ(k8[3], 0);
  EXPECT_EQ(k8[6], 127);
  EXPECT_EQ(l0.k_scale[row], 0.0f) << "layer 0 untouched";
  // Head 1 of the same slot is n_blocks * block_size rows on: its values
  // -2 -1 0 1 2 3 -3 -2.
  const int64_t row1 = (1 * 3 + 5 / 4) * 4 + 5 % 4;
  EXPECT_FLOAT_EQ(l1.k_scale[row1], 3.0f / 127);
  const int8_t* k8h1 = static_cast<const int8_t*>(l1.k) + row1 * hd;
  EXPECT_EQ(k8h1[5], 127);
  EXPECT_EQ(k8h1[6], -127);
  // Attending to the one slot (block 1, offset 1) returns V of that head.
  std::vector<int32_t> table = {0, 1};
  std::vector<float> q(hd, 0.1f);
  kernels::cpu::PagedKV l1c = l1;
  // Fill slots 0..4 so a context of 6 is defined: store the same token.
  for (int s = 0; s < 5; ++s) kernels::cpu::store_kv(l1c, s, k.data(), v.data());
  kernels::cpu::attention_head(q.data(), l1c, 1, table.data(), 6, 0.3f, 0.0f, out.data(), scratch.data());
  for (int64_t d = 0; d < hd; ++d) EXPECT_NEAR(out[d], v[hd + d], 0.5f / 127 + 1e-5);
}

}  // namespace
}  // namespace rinfer

#include "runtime/block_manager.h"

#include <algorithm>

#include "core/error.h"

namespace rinfer {

BlockManager::BlockManager(KVCache& kv, bool prefix_caching)
    : kv_(kv), block_size_(kv.block_size()), prefix_caching_(prefix_caching), blocks_(size_t(kv.n_blocks())) {
  // The manager hands out single blocks; a pool another user has half taken
  // would make its counts wrong.
  RINFER_CHECK(kv.n_free_blocks() == kv.n_blocks(), "BlockManager needs an unused KV cache");
}

uint64_t BlockManager::chain_hash(uint64_t prev, const int32_t* tokens, int n) {
  // FNV-1a over the previous hash and the token ids, then a splitmix64
  // finaliser to spread the bits. Hits are verified against the stored
  // tokens, so this only has to be fast and well mixed.
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix_in = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix_in(prev);
  for (int i = 0; i < n; ++i) mix_in(uint32_t(tokens[i]));
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

int64_t BlockManager::attach_cached_prefix(Sequence& seq) {
  RINFER_ASSERT(seq.block_table.empty());
  seq.n_computed = 0;
  seq.n_hashed_blocks = 0;
  seq.last_block_hash = 0;
  if (!prefix_caching_) return 0;
  // Only blocks that end before the last token: its logits are needed, so
  // at least that token is always run through the model.
  const int64_t max_blocks = (seq.n_tokens() - 1) / block_size_;
  uint64_t prev = 0;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const int32_t* t = seq.tokens.data() + i * block_size_;
    const uint64_t h = chain_hash(prev, t, block_size_);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    Block& b = blocks_[size_t(it->second)];
    if (!std::equal(b.tokens.begin(), b.tokens.end(), t) || b.parent != prev) break;
    if (b.ref == 0) evictable_.erase(b.lru);
    ++b.ref;
    seq.block_table.push_back(it->second);
    prev = h;
  }
  seq.n_hashed_blocks = int64_t(seq.block_table.size());
  seq.last_block_hash = prev;
  seq.n_computed = seq.n_hashed_blocks * block_size_;
  return seq.n_computed;
}

bool BlockManager::can_allocate(const Sequence& seq, int64_t n_tokens) const {
  const int64_t need = KVCache::blocks_for_tokens(n_tokens, block_size_) - int64_t(seq.block_table.size());
  return need <= n_available();
}

void BlockManager::allocate(Sequence& seq, int64_t n_tokens) {
  const int64_t need = KVCache::blocks_for_tokens(n_tokens, block_size_) - int64_t(seq.block_table.size());
  if (need <= 0) return;
  RINFER_CHECK(need <= n_available(), "KV cache is full: ", need, " more blocks needed, ", n_available(),
               " available");
  for (int64_t i = 0; i < need; ++i) seq.block_table.push_back(take_block());
}

int32_t BlockManager::take_block() {
  int32_t b;
  if (kv_.n_free_blocks() > 0) {
    b = kv_.allocate_block();
  } else {
    RINFER_ASSERT(!evictable_.empty());
    b = evictable_.front();
    evictable_.pop_front();
    forget(b);
  }
  blocks_[size_t(b)].ref = 1;
  return b;
}

void BlockManager::forget(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  auto it = by_hash_.find(blk.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  blk.hashed = false;
  blk.tokens.clear();
}

void BlockManager::register_computed(Sequence& seq) {
  if (!prefix_caching_) return;
  const int64_t full = std::min<int64_t>(seq.n_computed / block_size_, int64_t(seq.block_table.size()));
  for (int64_t i = seq.n_hashed_blocks; i < full; ++i) {
    const int32_t* t = seq.tokens.data() + i * block_size_;
    const uint64_t h = chain_hash(seq.last_block_hash, t, block_size_);
    const int32_t id = seq.block_table[size_t(i)];
    Block& b = blocks_[size_t(id)];
    // A block already registered is one this sequence got from the cache.
    // When another sequence registered the same prefix first (both computed
    // it at once), that copy stays the cached one and this block is freed
    // normally.
    if (!b.hashed && by_hash_.find(h) == by_hash_.end()) {
      b.hashed = true;
      b.hash = h;
      b.parent = seq.last_block_hash;
      b.tokens.assign(t, t + block_size_);
      by_hash_.emplace(h, id);
    }
    seq.last_block_hash = h;
  }
  seq.n_hashed_blocks = std::max(seq.n_hashed_blocks, full);
}

void BlockManager::free(Sequence& seq) {
  // Last block first: the end of a chain is the least likely to be shared,
  // so it is evicted before the blocks in front of it.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& b = blocks_[size_t(*it)];
    RINFER_ASSERT(b.ref > 0);
    if (--b.ref > 0) continue;
    if (b.hashed) {
      b.lru = evictable_.insert(evictable_.end(), *it);
    } else {
      kv_.free_block(*it);
    }
  }
  seq.block_table.clear();
  seq.n_computed = 0;
  seq.n_hashed_blocks = 0;
  seq.last_block_hash = 0;
}

}  // namespace rinfer

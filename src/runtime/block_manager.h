#pragma once
// BlockManager: the serving engine's view of the paged KV cache. It hands
// blocks of the KVCache pool to sequences, counts references so sequences
// with an identical token prefix share the blocks holding it (prefix
// caching), and keeps blocks that no sequence uses any more but whose
// contents are still valid as "cached": reusable by the next sequence with
// that prefix, evicted least recently used first when fresh blocks run out.
//
// A full block is identified by the hash of its whole chain (its tokens and,
// through the previous block's hash, every token before it), so a hit means
// the same tokens at the same positions. The tokens are compared too, so a
// hash collision can never serve wrong K/V. A block is registered only once
// its K/V have all been written (see register_computed), and the last token
// of a sequence is never served from the cache: its logits must be computed.
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/sequence.h"

namespace rinfer {

class BlockManager {
 public:
  BlockManager(KVCache& kv, bool prefix_caching);

  int block_size() const { return block_size_; }
  int64_t n_blocks() const { return kv_.n_blocks(); }
  // Blocks a sequence could get now: free ones plus cached ones nobody uses.
  int64_t n_available() const { return kv_.n_free_blocks() + int64_t(evictable_.size()); }
  int64_t n_used() const { return n_blocks() - n_available(); }  // referenced by some sequence
  int64_t n_cached_unused() const { return int64_t(evictable_.size()); }
  bool prefix_caching() const { return prefix_caching_; }

  // For a sequence without blocks (new or preempted): take the longest chain
  // of cached blocks matching its tokens, set n_computed to the tokens they
  // cover and return that count.
  int64_t attach_cached_prefix(Sequence& seq);
  // Whether / make seq.block_table cover n_tokens positions.
  bool can_allocate(const Sequence& seq, int64_t n_tokens) const;
  void allocate(Sequence& seq, int64_t n_tokens);  // throws rinfer::Error when out of blocks
  // Offer the sequence's newly completed full blocks (all tokens computed)
  // to the prefix cache.
  void register_computed(Sequence& seq);
  // Drop the sequence's references; its blocks go back to the pool, or to
  // the cached list when they hold a registered prefix.
  void free(Sequence& seq);

  // Chain hash of one block: depends on the previous block's hash and on the tokens.
  static uint64_t chain_hash(uint64_t prev, const int32_t* tokens, int n);

 private:
  struct Block {
    int32_t ref = 0;
    bool hashed = false;
    uint64_t hash = 0;
    uint64_t parent = 0;                 // hash of the block before it in its chain (0: first)
    std::vector<int32_t> tokens;         // a registered block's tokens, compared on every hit
    std::list<int32_t>::iterator lru;    // position in evictable_ while ref == 0 and hashed
  };
  int32_t take_block();  // a free block, else the least recently used cached one
  void forget(int32_t b);  // remove a block from the prefix cache

  KVCache& kv_;
  const int block_size_;
  const bool prefix_caching_;
  std::vector<Block> blocks_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::list<int32_t> evictable_;  // cached blocks with no reference; front = least recently used
};

}  // namespace rinfer

#pragma once
// Shard: which part of a model this instance holds — rank `rank` of `world`
// ranks that split its layers tensor-parallel. Layers load their part from
// it; who started the ranks (mpirun, a test's threads) is not their business.
#include <cstdint>

namespace rinfer {

struct Shard {
  int rank = 0;
  int world = 1;
  bool whole() const { return world == 1; }
};

// [begin, end) of `n` items for `shard`, cut on multiples of `align` (the
// last part takes the remainder); n need not divide evenly.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range shard_range(int64_t n, const Shard& shard, int64_t align);

}  // namespace rinfer

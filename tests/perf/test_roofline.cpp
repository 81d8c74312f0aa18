// The probes' four-stream reader (roofline.h read_quarters), which rinfer
// bench's bandwidth probe and bench_gemv_pairs --plain-quarters read with:
// it must read every line of its range at every kernel level, or a probe
// would report bandwidth for bytes it never loaded.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/kernel_test_util.h"
#include "perf/roofline.h"

namespace rinfer::kernels::cpu::testing {
namespace {

using perf::read_quarters;

// Word 0 of each 64-byte line reaches the result at every level (the SIMD
// readers xor whole lines and return a fold that keeps word 0), so a buffer
// that is zero but for word 0 of one line reads as that word.
TEST(Roofline, ReadQuartersReadsEveryLineAtEveryLevel) {
  const size_t bytes = 64 * 64;  // 64 lines, 16 per quarter
  std::unique_ptr<uint64_t, decltype(&std::free)> buf(static_cast<uint64_t*>(std::aligned_alloc(64, bytes)),
                                                      &std::free);
  ASSERT_TRUE(buf);
  uint64_t* w = buf.get();
  std::memset(w, 0, bytes);
  for (KernelLevel isa : supported_isas()) {
    IsaScope scope(isa);
    EXPECT_EQ(read_quarters(w, bytes), 0u) << isa_name(isa);
    for (size_t line = 0; line < bytes / 64; ++line) {
      const uint64_t mark = 0x9e3779b97f4a7c15ull * (line + 1);
      w[line * 8] = mark;
      ASSERT_EQ(read_quarters(w, bytes), mark) << isa_name(isa) << " line " << line;
      w[line * 8] = 0;
    }
  }
}

}  // namespace
}  // namespace rinfer::kernels::cpu::testing

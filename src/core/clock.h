#pragma once
// The monotonic clock in nanoseconds, for the timers that are subtracted
// from one another across threads (the thread pool's busy/wait counters,
// bench --profile's stage timers): steady_clock, which reads the TSC
// through the vDSO on Linux, a few tens of nanoseconds per call.
#include <chrono>
#include <cstdint>

namespace rinfer {

inline uint64_t steady_now_ns() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace rinfer

#pragma once
// Resident memory of this process, for bench reports and memory tests.
#include <cstdint>

namespace rinfer {

uint64_t peak_rss_bytes();     // high-water mark since start (VmHWM)
uint64_t current_rss_bytes();  // now (VmRSS)
// Reset the high-water mark to the current RSS (Linux >= 4.0; returns false if not possible).
bool reset_peak_rss();

}  // namespace rinfer

#include "core/process_stats.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace rinfer {

namespace {
uint64_t status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0) return std::stoull(line.substr(n + 1)) * 1024;
  return 0;
}
}  // namespace

uint64_t peak_rss_bytes() { return status_kb("VmHWM"); }
uint64_t current_rss_bytes() { return status_kb("VmRSS"); }

bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace rinfer

// bench_prefetch_fill: does a run of software prefetches bring a region of
// memory into this core's caches? The decode attention and the ideas for
// overlapping its fetch with arithmetic (docs/performance.md) rest on the
// answer. Each round, for a cold region of --kb KB (a 64 MiB read between
// modes evicts it; every mode gets its own region), one of:
//   none    nothing (the cold read it is compared against);
//   burst   prefetcht1 on every line, back to back;
//   paced   prefetcht1 on every line, a chain of --work dependent
//           multiply-adds after every 4 lines (the pace of a compute loop);
//   load    a load of every line (demand misses);
// then --wait-us of spinning, then a timed read of the region. It prints,
// per mode, the medians over the rounds of the time the lines took to issue
// and of the read after, and the read's GB/s: a read near the caches'
// speed means the lines arrived and stayed, one near `none` means most did
// not. The modes take turns within each round.
//
// --small-pages puts the regions in 4 KB pages (MADV_NOHUGEPAGE) instead of
// the huge pages the model's weights and KV cache get.
//
// Usage: bench_prefetch_fill [--kb N=256] [--rounds N=40] [--wait-us N=200] [--work N=40] [--small-pages]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "core/buffer.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Sum of one 8-byte word per line (every line of [p, p + n) is read). Not
// read_probe.h's read_avx512: this tool runs on CPUs without AVX-512 too,
// and one load per line is all a line's arrival needs.
uint64_t read_lines(const uint8_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0;
  for (size_t o = 0; o + 128 <= n; o += 128) {
    s0 += *reinterpret_cast<const volatile uint64_t*>(p + o);
    s1 += *reinterpret_cast<const volatile uint64_t*>(p + o + 64);
  }
  return s0 + s1;
}

// prefetcht1 as an asm statement: a loop of only __builtin_prefetch may be
// deleted by the compiler.
inline void prefetch_t1(const void* p) { asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p))); }

enum Mode { kNone, kBurst, kPaced, kLoad, kModes };
const char* const kModeNames[kModes] = {"none", "burst", "paced", "load"};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int kb = 256, rounds = 40, wait_us = 200, work = 40;
  bool small_pages = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--small-pages") {
      small_pages = true;
      continue;
    }
    int* target = a == "--kb"        ? &kb
                  : a == "--rounds"  ? &rounds
                  : a == "--wait-us" ? &wait_us
                  : a == "--work"    ? &work
                                     : nullptr;
    if (target == nullptr || i + 1 >= argc || std::atoi(argv[i + 1]) < 0 || (target != &work && std::atoi(argv[i + 1]) == 0)) {
      std::fprintf(stderr, "usage: bench_prefetch_fill [--kb N] [--rounds N] [--wait-us N] [--work N] [--small-pages]\n");
      return 2;
    }
    *target = std::atoi(argv[++i]);
  }
  const size_t region = size_t(kb) << 10, flush_bytes = size_t(64) << 20;
  // Regions rotate through a 512 MiB arena (huge pages where the kernel
  // gives them, as the model's weights and KV cache get them).
  const size_t arena_bytes = std::max<size_t>(size_t(512) << 20, 8 * region);
  rinfer::Buffer arena(arena_bytes, /*zero=*/false), flush(flush_bytes, /*zero=*/false);
  // Buffer asked for huge pages (MADV_HUGEPAGE); nothing is touched yet, so
  // the other advice still decides the page size.
  if (small_pages && madvise(arena.as<uint8_t>(), arena_bytes, MADV_NOHUGEPAGE) != 0) {
    std::fprintf(stderr, "bench_prefetch_fill: madvise(MADV_NOHUGEPAGE) failed\n");
    return 1;
  }
  for (size_t o = 0; o < arena_bytes; o += 64) arena.as<uint8_t>()[o] = uint8_t(o >> 6);
  for (size_t o = 0; o < flush_bytes; o += 64) flush.as<uint8_t>()[o] = 1;
  const size_t slots = arena_bytes / region;
  volatile uint64_t sink = 0;
  std::vector<double> issue[kModes], read[kModes];
  size_t next = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int m = 0; m < kModes; ++m) {
      const uint8_t* p = arena.as<uint8_t>() + (next++ % slots) * region;
      sink = sink + read_lines(flush.as<uint8_t>(), flush_bytes);
      double x = 1.0;
      const double t0 = now_s();
      for (size_t o = 0; o < region; o += 64) {
        if (m == kBurst || m == kPaced) prefetch_t1(p + o);
        if (m == kLoad) sink = sink + *reinterpret_cast<const volatile uint64_t*>(p + o);
        if (m == kPaced && (o & 255) == 192)
          for (int w = 0; w < work; ++w) {
            x = x * 1.0000001 + 1e-9;
            asm volatile("" : "+x"(x));
          }
      }
      const double t1 = now_s();
      while (now_s() - t1 < wait_us * 1e-6) {
      }
      const double t2 = now_s();
      sink = sink + read_lines(p, region);
      const double t3 = now_s();
      issue[m].push_back(t1 - t0);
      read[m].push_back(t3 - t2);
    }
  }
  std::printf("region %d KB in %s pages, %d rounds, wait %d us, paced: %d multiply-adds per 4 lines\n", kb,
              small_pages ? "4 KB" : "huge", rounds, wait_us, work);
  std::printf("%-6s %12s %14s %10s\n", "mode", "issue us", "read after us", "GB/s");
  for (int m = 0; m < kModes; ++m) {
    const double rd = median(read[m]);
    std::printf("%-6s %12.2f %14.2f %10.1f\n", kModeNames[m], median(issue[m]) * 1e6, rd * 1e6,
                rd > 0 ? double(region) / rd / 1e9 : 0.0);
  }
  return 0;
}

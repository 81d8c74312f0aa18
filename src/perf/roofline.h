#pragma once
// The machine's own limits, measured in the process that is being measured:
// the memory read bandwidth decode is bounded by, and the peak rate of the
// multiply instructions prefill is bounded by. `rinfer bench` divides what
// it achieved by these (same run, same threads), so a ratio does not depend
// on a figure taken on another day on a noisy shared machine.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/thread_pool.h"

namespace rinfer::perf {

// The instruction whose register-only throughput bounds a matmul path.
enum class PeakKind {
  F32Fma,   // vfmadd on f32 (f32 weights, BF16 "fma" GEMM)
  Bf16Dot,  // vdpbf16ps (BF16 "dot" GEMM)
  Int8Dot,  // vpdpbusd (W8A8 / W4A8 GEMM)
};
const char* peak_kind_name(PeakKind k);

// The instruction bounding a matmul path named by matmul_path() /
// matmul_q_path() (ops.h): false for the scalar paths, which have none.
bool peak_kind_of_path(std::string_view path, PeakKind& kind);

// Peak rate in G ops/s (a multiply-add counts 2) of `k`'s instruction at the
// active ISA level (active_isa()), on all of the pool's threads at once: best
// of a few short register-only runs. 0 when that level lacks the instruction.
double measure_peak_gops(PeakKind k, ThreadPool& pool);

// Read bandwidth in GB/s: every thread of the pool streams its share of a
// `bytes` buffer (anonymous memory with huge pages where the kernel allows,
// like the weights); best of `reps` passes after one warm-up pass. The buffer
// is freed before returning. Each thread reads its share as four concurrent
// streams (its quarters): one stream per thread reads less on some cores
// (Zen 5), and the decode GEMVs read two or four per thread, so a one-stream
// probe is not the ceiling.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t(512) << 20, int reps = 3);

// Streams [p, p + bytes) once at the active ISA level as four concurrent
// streams (its quarters), the way the probes read a thread's share (p
// 64-byte aligned, bytes a multiple of 256). Returns a fold of the data
// read (word 0 of every line reaches it at every level), so that the loads
// are kept.
uint64_t read_quarters(const void* p, size_t bytes);

// A read probe to interleave with the work it is compared with (bench's
// decode steps): on a shared host the bandwidth changes from one second to
// the next, and a probe taken between the steps sees the same phases as the
// steps. `n_slices` slices of `slice_bytes` each (huge pages where the kernel
// allows), all faulted in by the constructor, so resident_bytes() stays
// resident until destruction; read_slice() streams the next slice, round
// robin, on every thread of the pool and returns the seconds it took. With
// enough slices a slice is out of the caches when its turn comes again.
class ReadProbe {
 public:
  ReadProbe(ThreadPool& pool, size_t slice_bytes, int n_slices);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  double read_slice();
  size_t slice_bytes() const { return chunk_ * size_t(pool_.size()); }
  size_t resident_bytes() const { return bytes_; }
  const uint8_t* data() const { return buf_; }  // the slices, one after the other

 private:
  ThreadPool& pool_;
  uint8_t* buf_ = nullptr;
  size_t chunk_ = 0, bytes_ = 0;  // chunk_: one thread's share of a slice
  int n_slices_ = 0, next_ = 0;
};

}  // namespace rinfer::perf

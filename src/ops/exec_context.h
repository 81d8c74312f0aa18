#pragma once
// ExecContext: where and with what an op runs — the device, and for the CPU
// the thread pool that splits the op's work. It travels in the model's
// forward context, so that no layer signature names a pool (a stream will be
// another member when a device backend needs one).
#include <cstdint>
#include <utility>

#include "core/device.h"
#include "core/thread_pool.h"

namespace rinfer {

struct ExecContext {
  Device device = Device::Cpu;
  ThreadPool* pool = nullptr;  // CPU: the threads an op's work is split over (null: the calling thread alone)

  int threads() const { return pool ? pool->size() : 1; }
};

// Row-wise work of a batch (norms, residual adds, RoPE): f(r0, r1) for rows
// [r0, r1). A prompt's rows are split over the pool; a decode step's few rows
// are not worth a dispatch and stay on the calling thread.
constexpr int64_t kParallelMinRows = 16;
template <typename F>
void for_rows(const ExecContext& ctx, int64_t rows, F&& f) {
  if (rows < kParallelMinRows || ctx.threads() == 1) {
    f(int64_t(0), rows);
    return;
  }
  ctx.pool->parallel_for(rows, 1, [&](int64_t r0, int64_t r1, int) { f(r0, r1); });
}

}  // namespace rinfer

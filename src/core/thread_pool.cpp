#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace rinfer {

namespace {
// How long an idle worker spins before sleeping. Long enough to bridge the
// gap between the jobs of one forward pass, short enough not to steal a core
// from other processes (or from the caller when cores are oversubscribed).
constexpr auto kSpinTime = std::chrono::microseconds(100);

template <typename Pred>
bool spin_until(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}
}  // namespace

int ThreadPool::hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : hardware_threads()) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    (*fn_)(task, thread);
  }
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    work(thread);
    pending_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(int64_t n_tasks, const TaskFn& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) fn(i, 0);
    return;
  }
  fn_ = &fn;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  pending_workers_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    // Publishing under the mutex pairs with the sleeping workers' wait.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  work(0);
  // Workers finish within microseconds unless descheduled; then yield the core.
  while (!spin_until([&] { return pending_workers_.load(std::memory_order_acquire) == 0; }))
    std::this_thread::yield();
  fn_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t align,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  align = std::max<int64_t>(align, 1);
  int64_t units = (n + align - 1) / align;
  int64_t parts = std::min<int64_t>(n_threads_, units);
  int64_t per = (units + parts - 1) / parts;
  run(parts, [&](int64_t p, int thread) {
    int64_t b = std::min(n, p * per * align);
    int64_t e = std::min(n, (p + 1) * per * align);
    if (b < e) fn(b, e, thread);
  });
}

}  // namespace rinfer

#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "core/clock.h"

namespace rinfer {

namespace {
std::atomic<bool> g_stats_on{false};
std::atomic<uint64_t> g_worker_busy_ns{0}, g_caller_wait_ns{0};

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

void ThreadPool::set_stats(bool on) { g_stats_on.store(on, std::memory_order_relaxed); }

ThreadPool::Stats ThreadPool::stats() {
  return Stats{g_worker_busy_ns.load(std::memory_order_relaxed), g_caller_wait_ns.load(std::memory_order_relaxed)};
}

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
    job_.generation.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
  const Job& job = job_;
  for (;;) {
    int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= job.n_tasks) break;
    job.fn(job.ctx, task, thread);
  }
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return job_.generation.load(std::memory_order_acquire) != seen; })) {
      // Going to sleep: counted in sleepers_ first (seq_cst, as run()'s
      // generation bump and its read of sleepers_), so that run() either
      // sees this worker and notifies it, or bumped the generation before
      // the count and the check under the mutex below sees the new job.
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return job_.generation.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    seen = job_.generation.load(std::memory_order_acquire);
    if (stop_.load()) return;
    if (g_stats_on.load(std::memory_order_relaxed)) {
      const uint64_t t0 = steady_now_ns();
      work(thread);
      g_worker_busy_ns.fetch_add(steady_now_ns() - t0, std::memory_order_relaxed);
    } else {
      work(thread);
    }
    pending_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(int64_t n_tasks, const TaskFn& fn) {
  run(n_tasks, [](void* f, int64_t task, int thread) { (*static_cast<const TaskFn*>(f))(task, thread); },
      const_cast<TaskFn*>(&fn));
}

void ThreadPool::run(int64_t n_tasks, RawTaskFn fn, void* ctx) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) fn(ctx, i, 0);
    return;
  }
  job_.fn = fn;
  job_.ctx = ctx;
  job_.n_tasks = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  pending_workers_.store(int(workers_.size()), std::memory_order_relaxed);
  job_.generation.fetch_add(1);  // seq_cst: publishes the job (release), ordered before the read of sleepers_
  if (sleepers_.load() > 0) {
    // Taking the mutex orders this notify after a sleeping worker's check.
    { std::lock_guard<std::mutex> lock(mutex_); }
    cv_.notify_all();
  }
  work(0);
  const uint64_t t_done = g_stats_on.load(std::memory_order_relaxed) ? steady_now_ns() : 0;
  // Workers finish within microseconds unless descheduled; then yield the core.
  while (!spin_until([&] { return pending_workers_.load(std::memory_order_acquire) == 0; }))
    std::this_thread::yield();
  if (t_done) g_caller_wait_ns.fetch_add(steady_now_ns() - t_done, std::memory_order_relaxed);
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

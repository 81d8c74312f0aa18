#pragma once
// ThreadPool: persistent workers started once (never per layer or per token).
// run(n_tasks, fn) calls fn(task, thread) for every task in [0, n_tasks),
// spread over the caller plus the workers, and returns when all are done.
// Workers spin briefly between jobs (a decode step issues hundreds of short
// jobs) and then sleep, so an idle engine costs no CPU.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rinfer {

class ThreadPool {
 public:
  // n_threads counts the calling thread; 0 means all hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  using TaskFn = std::function<void(int64_t task, int thread)>;
  void run(int64_t n_tasks, const TaskFn& fn);
  // The same with a plain function and context (the kernels' jobs): one
  // less object for a worker to fetch from the caller's cache.
  using RawTaskFn = void (*)(void* ctx, int64_t task, int thread);
  void run(int64_t n_tasks, RawTaskFn fn, void* ctx);

  // Split [0, n) into one contiguous range per thread (aligned to `align`)
  // and call fn(begin, end, thread) for the non-empty ones.
  void parallel_for(int64_t n, int64_t align,
                    const std::function<void(int64_t begin, int64_t end, int thread)>& fn);

  static int hardware_threads();

  // Where the threads' time goes, for `rinfer bench --profile` (its "busy"
  // column): while on, every job adds the workers' time inside its tasks to
  // worker_busy_ns and the caller's wait for the workers after its own
  // tasks (the job's imbalance and the workers' wake-up) to caller_wait_ns.
  // A span of W ns on the caller of an n-thread pool then kept its threads
  // busy for (W - caller wait) + worker busy of n * W ns; serial work on the
  // caller (norms, RoPE at decode) counts as busy for one thread only.
  // Process-wide (summed over pools); off by default, and then a job costs
  // one relaxed load more.
  struct Stats {
    uint64_t worker_busy_ns = 0;
    uint64_t caller_wait_ns = 0;
  };
  static void set_stats(bool on);
  static Stats stats();

 private:
  void worker_loop(int thread);
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  // What a dispatch moves between cores: every cache line that crosses
  // cores costs latency, paid again on each of a decode step's many jobs.
  // A worker spins on one line that holds the whole job (the caller's
  // stores fill it in and the generation publishes it: the worker fetches
  // the line once per job); the task counter and the completion count each
  // have a line of their own.
  struct alignas(64) Job {
    std::atomic<uint64_t> generation{0};
    RawTaskFn fn = nullptr;
    void* ctx = nullptr;
    int64_t n_tasks = 0;
  };
  Job job_;
  alignas(64) std::atomic<int64_t> next_task_{0};
  alignas(64) std::atomic<int> pending_workers_{0};
  alignas(64) std::atomic<int> sleepers_{0};  // workers waiting on cv_ (or about to)
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace rinfer

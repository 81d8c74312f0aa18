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

  // Split [0, n) into one contiguous range per thread (aligned to `align`)
  // and call fn(begin, end, thread) for the non-empty ones.
  void parallel_for(int64_t n, int64_t align,
                    const std::function<void(int64_t begin, int64_t end, int thread)>& fn);

  static int hardware_threads();

 private:
  void worker_loop(int thread);
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  const TaskFn* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> pending_workers_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace rinfer

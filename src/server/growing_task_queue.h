#pragma once
// GrowingTaskQueue: cpp-httplib's task queue with threads started as
// connections need them, up to a maximum. Every held connection owns a
// thread, so the maximum is the connection cap plus a few threads that turn
// away connections beyond it; starting them lazily keeps an idle server
// small.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace rinfer::server {

class GrowingTaskQueue : public httplib::TaskQueue {
 public:
  explicit GrowingTaskQueue(size_t max_threads) : max_threads_(max_threads) {}
  ~GrowingTaskQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins the threads.
  void shutdown() override;

 private:
  void work();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stop_ = false;
};

}  // namespace rinfer::server

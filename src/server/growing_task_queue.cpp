#include "server/growing_task_queue.h"

namespace rinfer::server {

void GrowingTaskQueue::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mu_);
  jobs_.push_back(std::move(fn));
  if (idle_ >= jobs_.size() || threads_.size() >= max_threads_) {
    cv_.notify_one();
    return;
  }
  threads_.emplace_back([this] { work(); });
}

void GrowingTaskQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void GrowingTaskQueue::work() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [this] { return stop_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping, nothing left
    auto fn = std::move(jobs_.front());
    jobs_.pop_front();
    lk.unlock();
    fn();
    lk.lock();
  }
}

}  // namespace rinfer::server

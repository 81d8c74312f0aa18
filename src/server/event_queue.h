#pragma once
// EventQueue: hands generation events from the engine thread (which must
// never block on a client) to the HTTP thread serving the request. The
// engine's callback holds a shared_ptr to it, so it stays valid even when
// the HTTP side has already given up on the request.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "runtime/engine.h"

namespace rinfer::server {

class EventQueue {
 public:
  void push(GenerationEvent ev) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      events_.push_back(std::move(ev));
    }
    cv_.notify_one();
  }
  // Moves every queued event into `out`; waits up to `timeout` for the
  // first. False when none came.
  bool pop_all(std::deque<GenerationEvent>& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return false;
    for (auto& ev : events_) out.push_back(std::move(ev));
    events_.clear();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationEvent> events_;
};

}  // namespace rinfer::server

#include "parallel/watchdog.h"

#include <algorithm>
#include <chrono>

namespace rinfer {

Watchdog::Watchdog(double limit_s, int rank, void (*on_timeout)(int, double))
    : limit_s_(limit_s), rank_(rank), on_timeout_(on_timeout) {
  if (limit_s_ > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

// Looks in a few times per limit: a step seen in progress at every look for
// longer than the limit has hung (it fires between limit and limit + tick).
void Watchdog::loop() {
  using clock = std::chrono::steady_clock;
  const auto tick = std::chrono::duration<double>(std::clamp(limit_s_ / 10, 0.01, 1.0));
  uint64_t seen = 0;
  clock::time_point since;
  std::unique_lock<std::mutex> lk(mu_);
  while (!cv_.wait_for(lk, tick, [&] { return stop_; })) {
    const uint64_t step = step_.load(std::memory_order_relaxed);
    const auto now = clock::now();
    if (step == 0 || step != seen) {
      seen = step;
      since = now;
      continue;
    }
    if (std::chrono::duration<double>(now - since).count() > limit_s_) on_timeout_(rank_, limit_s_);
  }
}

}  // namespace rinfer

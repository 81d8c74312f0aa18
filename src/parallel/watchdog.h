#pragma once
// Watchdog: ends the whole job when one step of a split model takes longer
// than a limit. A rank that dies is noticed by mpirun, which ends the
// others; a rank that stops answering (stopped, swapped out, a hung network
// between hosts) is not, and every other rank would wait in a collective or
// a receive forever. Armed around each step (not while a rank idles
// between requests); when it fires it prints one line and ends the job.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace rinfer {

class Watchdog {
 public:
  // limit_s <= 0: never fires (and no thread is started). on_timeout runs
  // on the watchdog's thread and must not return (it ends the process).
  Watchdog(double limit_s, int rank, void (*on_timeout)(int rank, double limit_s));
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A step begins / ends: two relaxed stores, nothing else on the step's path.
  void arm() { step_.store(++steps_, std::memory_order_relaxed); }
  void disarm() { step_.store(0, std::memory_order_relaxed); }

 private:
  void loop();
  double limit_s_;
  int rank_;
  void (*on_timeout_)(int, double);
  uint64_t steps_ = 0;               // armed so far (the arming thread's)
  std::atomic<uint64_t> step_{0};    // the step in progress; 0: none
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rinfer

// ThreadPool: every task of a job runs exactly once, on a valid thread,
// whether the workers are spinning between jobs or asleep (the wake-up path
// after kSpinTime), and the pool shuts down from either state; and the
// thread-time accounting behind bench --profile's "busy" column.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace rinfer {
namespace {

// Runs one job of n_tasks tasks and checks each ran once and every thread
// index is one of the pool's.
void run_and_check(ThreadPool& pool, int64_t n_tasks) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n_tasks));
  std::atomic<int> bad_thread{0};
  pool.run(n_tasks, [&](int64_t task, int thread) {
    hits[static_cast<size_t>(task)].fetch_add(1);
    if (thread < 0 || thread >= pool.size()) bad_thread.fetch_add(1);
  });
  for (int64_t t = 0; t < n_tasks; ++t) ASSERT_EQ(hits[static_cast<size_t>(t)].load(), 1) << "task " << t;
  EXPECT_EQ(bad_thread.load(), 0);
}

TEST(ThreadPool, EveryTaskRunsOnceForAnyCount) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 3, 4, 5, 7, 64, 1000}) run_and_check(pool, n);
  }
}

TEST(ThreadPool, ManyShortJobsBackToBack) {
  // The decode pattern: thousands of jobs with the workers spinning between them.
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 20000; ++job)
    pool.run(3, [&](int64_t task, int) { sum.fetch_add(task + 1, std::memory_order_relaxed); });
  EXPECT_EQ(sum.load(), int64_t(20000) * 6);
}

TEST(ThreadPool, WakesSleepingWorkers) {
  // Gaps longer than the workers' spin make them sleep on the condition
  // variable; every job after such a gap must still run all its tasks, and
  // the workers must take part (a job of many slow tasks would otherwise
  // run on the caller alone).
  ThreadPool pool(2);
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(round % 2 ? 2000 : 150));
    std::atomic<int> on_worker{0};
    std::vector<std::atomic<int>> hits(8);
    pool.run(8, [&](int64_t task, int thread) {
      hits[static_cast<size_t>(task)].fetch_add(1);
      if (thread != 0) on_worker.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    EXPECT_GT(on_worker.load(), 0) << "round " << round;
  }
}

TEST(ThreadPool, RawFunctionJobs) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(10);
  pool.run(
      10,
      [](void* ctx, int64_t task, int) {
        (*static_cast<std::vector<std::atomic<int>>*>(ctx))[static_cast<size_t>(task)].fetch_add(1);
      },
      &hits);
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ParallelForCoversTheRangeOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 5, 16, 17, 100}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 4, [&](int64_t b, int64_t e, int) {
      EXPECT_EQ(b % 4, 0);
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "n " << n;
  }
}

TEST(ThreadPool, ShutsDownWhileSpinningOrAsleep) {
  for (int sleep_us : {0, 5000}) {
    ThreadPool pool(4);
    run_and_check(pool, 16);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }  // destructors join the workers; a hang here fails the test by timeout
}

// ThreadPool::Stats over one job on a 2-thread pool: the threads' busy time
// (the caller's time less its wait for the worker, plus the worker's time
// in tasks) and the job's wall time on the caller.
struct JobTime {
  double busy_ms, wall_ms;
};
JobTime time_job(ThreadPool& pool, const std::function<void(int64_t, int)>& fn) {
  using Clock = std::chrono::steady_clock;
  const ThreadPool::Stats s0 = ThreadPool::stats();
  const auto t0 = Clock::now();
  pool.run(2, fn);
  const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const ThreadPool::Stats s1 = ThreadPool::stats();
  const double wait = double(s1.caller_wait_ns - s0.caller_wait_ns) / 1e6;
  const double worker = double(s1.worker_busy_ns - s0.worker_busy_ns) / 1e6;
  return {wall - wait + worker, wall};
}

TEST(ThreadPool, StatsCountTheThreadsTimeInTasks) {
  ThreadPool pool(2);
  const auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  // Off (the default): jobs leave the counters alone.
  ThreadPool::set_stats(false);
  const ThreadPool::Stats off0 = ThreadPool::stats();
  pool.run(2, [&](int64_t, int) { sleep_ms(5); });
  EXPECT_EQ(ThreadPool::stats().worker_busy_ns, off0.worker_busy_ns);
  EXPECT_EQ(ThreadPool::stats().caller_wait_ns, off0.caller_wait_ns);

  ThreadPool::set_stats(true);
  // Two 30 ms tasks: whichever thread runs which (or the caller both, when
  // the worker wakes late), the threads were busy for at least 60 ms, and
  // never for more than both threads' whole time.
  const JobTime even = time_job(pool, [&](int64_t, int) { sleep_ms(30); });
  EXPECT_GE(even.busy_ms, 60.0 - 0.5);
  EXPECT_LE(even.busy_ms, 2 * even.wall_ms + 0.01);
  // One 50 ms task and one empty one: one thread waits for the other, and
  // the idle time shows (2 x wall - busy is the time a thread was not in a
  // task; about 50 ms here).
  const JobTime lopsided = time_job(pool, [&](int64_t task, int) {
    if (task == 1) sleep_ms(50);
  });
  EXPECT_GE(lopsided.busy_ms, 50.0 - 0.5);
  EXPECT_GE(2 * lopsided.wall_ms - lopsided.busy_ms, 25.0);
  ThreadPool::set_stats(false);
}

}  // namespace
}  // namespace rinfer

// profile::Scope's thread accounting (bench --profile's "busy" column): a
// stage whose pool job keeps both threads working counts both threads' time,
// serial work on the calling thread counts one thread's, and turning the
// profile off stops both.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/thread_pool.h"
#include "model/stage_profile.h"

namespace rinfer {
namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

const profile::StageTotals& decode_stage(profile::Stage s) {
  static profile::PhaseTotals t;
  t = profile::totals(profile::Phase::Decode);
  return t.stages[size_t(s)];
}

TEST(StageProfile, BusyCountsEveryThreadInTheStagesJobs) {
  ThreadPool pool(2);
  profile::set_enabled(true);
  profile::set_phase(profile::Phase::Decode);
  {
    // Two 30 ms tasks on two threads (or both on the caller when the worker
    // wakes late): 60 ms of thread time in any case.
    profile::Scope s(profile::Stage::GateUp);
    pool.run(2, [](int64_t, int) { sleep_ms(30); });
  }
  {
    // Serial work on the calling thread only.
    profile::Scope s(profile::Stage::Norm);
    sleep_ms(20);
  }
  const profile::StageTotals gu = decode_stage(profile::Stage::GateUp);
  EXPECT_EQ(gu.calls, 1u);
  EXPECT_GE(double(gu.busy_ns), 60e6 - 0.5e6);
  EXPECT_LE(gu.busy_ns, 2 * gu.ns);
  const profile::StageTotals norm = decode_stage(profile::Stage::Norm);
  EXPECT_EQ(norm.busy_ns, norm.ns);
  EXPECT_GE(double(norm.ns), 20e6);

  // Off: no stage is recorded and the pool stops counting.
  profile::set_enabled(false);
  const ThreadPool::Stats s0 = ThreadPool::stats();
  {
    profile::Scope s(profile::Stage::GateUp);
    pool.run(2, [](int64_t, int) { sleep_ms(2); });
  }
  EXPECT_EQ(decode_stage(profile::Stage::GateUp).calls, 0u);
  EXPECT_EQ(ThreadPool::stats().worker_busy_ns, s0.worker_busy_ns);
  EXPECT_EQ(ThreadPool::stats().caller_wait_ns, s0.caller_wait_ns);
}

}  // namespace
}  // namespace rinfer

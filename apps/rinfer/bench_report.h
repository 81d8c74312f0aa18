#pragma once
// Reporting shared by `rinfer bench` (one sequence) and `bench --batch`:
// mean ± std series and the --profile tables.
#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/stage_profile.h"

namespace rinfer::cli {

struct Series {
  std::vector<double> v;
  double mean() const {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
  }
  double std() const {
    if (v.size() < 2) return 0;
    double m = mean(), s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size() - 1));
  }
  double median() const {
    if (v.empty()) return 0;
    std::vector<double> w = v;
    std::sort(w.begin(), w.end());
    const size_t n = w.size();
    return n % 2 ? w[n / 2] : 0.5 * (w[n / 2 - 1] + w[n / 2]);
  }
};

// The --profile tables (and their JSON): per phase, each stage's time per
// forward call and its share of the call; for a prompt the GFLOP/s of the
// stages that run matmul kernels (against the instruction peak), for a
// decode step the bytes of weights (attention: KV cache) a stage reads and
// its rate (against the measured read bandwidth). With more than one
// thread, "busy" is the share of the pool's thread time the stage kept busy
// (StageTotals::busy_ns): under 100 % a job's threads waited for one
// another (imbalance, wake-up), and serial work on the calling thread
// shows as 1 / threads.
nlohmann::json print_profile(const profile::PhaseTotals (&prof)[2], double peak_gops, double mem_bw, int threads);

}  // namespace rinfer::cli

#pragma once
// Metrics: what /metrics serves, in the Prometheus text format (0.0.4):
// the engine's gauges and counters (running / waiting requests, KV blocks,
// prompt and generation tokens, preemptions, prefix cache) plus the
// per-request latency histograms the server observes (TTFT, TPOT, end to
// end). Throughput is the rate() of the token counters.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace rinfer::server {

// A cumulative histogram with fixed bucket bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket / _sum / _count lines of metric `name`.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), plus +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

class Metrics {
 public:
  Metrics();
  // A request (all its choices) ended. finish_reason: stop, length, cancelled, error.
  void observe_finished(const std::string& finish_reason, const GenerationEvent& last);
  void count_rejected(int http_status);  // requests refused before reaching the engine
  std::string render(const EngineStats& s) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, tpot_, e2e_;
  std::map<std::string, uint64_t> finished_;
  std::map<int, uint64_t> rejected_;
};

}  // namespace rinfer::server

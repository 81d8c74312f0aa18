#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rinfer::cli {

nlohmann::json print_profile(const profile::PhaseTotals (&prof)[2], double peak_gops, double mem_bw, int threads) {
  nlohmann::json out = nlohmann::json::object();
  for (int p = 0; p < 2; ++p) {
    const profile::PhaseTotals& t = prof[p];
    const bool prefill = p == 0;
    const char* phase = profile::phase_name(prefill ? profile::Phase::Prefill : profile::Phase::Decode);
    if (t.forwards == 0) continue;
    const double calls = double(t.forwards), fwd_ms = double(t.forward_ns) / 1e6 / calls;
    const double roof = prefill ? peak_gops : mem_bw;
    std::printf("  %s profile, per forward call (%.3f ms, mean of %llu):\n", phase, fwd_ms,
                static_cast<unsigned long long>(t.forwards));
    std::printf("    %-14s %9s %7s %6s %10s %8s%s\n", "stage", "ms", "share", threads > 1 ? "busy" : "",
                prefill ? "GFLOP" : "MB read", prefill ? "GFLOP/s" : "GB/s",
                roof > 0 ? (prefill ? "  of peak" : "  of bw") : "");
    nlohmann::json stages = nlohmann::json::array();
    double listed_ms = 0;
    for (size_t s = 0; s < t.stages.size(); ++s) {
      const profile::StageTotals& st = t.stages[s];
      if (st.calls == 0) continue;
      const double ms = double(st.ns) / 1e6 / calls;
      listed_ms += ms;
      const char* name = profile::stage_name(profile::Stage(s));
      nlohmann::json js = {{"stage", name}, {"ms", ms}, {"share", ms / fwd_ms}, {"calls", double(st.calls) / calls}};
      std::printf("    %-14s %9.3f %6.1f%%", name, ms, 100 * ms / fwd_ms);
      if (threads > 1) {
        const double busy = st.ns > 0 ? double(st.busy_ns) / (double(threads) * double(st.ns)) : 0.0;
        js["threads_busy"] = busy;
        std::printf(" %5.0f%%", 100 * busy);
      } else {
        std::printf(" %6s", "");
      }
      // A rate: GFLOP/s (2 per multiply-add) or GB/s; both are per ns * 1e9.
      const uint64_t amount = prefill ? 2 * st.macs : st.bytes;
      if (amount > 0) {
        const double rate = double(amount) / double(st.ns);
        js[prefill ? "gflop" : "bytes"] = double(amount) / calls / (prefill ? 1e9 : 1.0);
        js[prefill ? "gflop_s" : "gb_s"] = rate;
        std::printf(" %10.2f %8.1f", double(amount) / calls / (prefill ? 1e9 : 1e6), rate);
        if (roof > 0) std::printf("  %7.2f", rate / roof), js[prefill ? "peak_ratio" : "bandwidth_ratio"] = rate / roof;
      }
      std::printf("\n");
      stages.push_back(js);
    }
    // Inside forward but in no stage: workspace lookups, batch bookkeeping.
    std::printf("    %-14s %9.3f %6.1f%%\n", "(rest)", fwd_ms - listed_ms, 100 * (fwd_ms - listed_ms) / fwd_ms);
    out[phase] = {{"forward_calls", t.forwards}, {"forward_ms", fwd_ms}, {"rest_ms", fwd_ms - listed_ms},
                  {"stages", stages}};
    if (t.comm_calls > 0) {
      // Tensor-parallel collectives, already counted in the stages above.
      const double ms = double(t.comm_ns) / 1e6 / calls;
      const double kb = double(t.comm_bytes) / 1e3 / double(t.comm_calls);
      std::printf("    communication  %9.3f %6.1f%%  (in the stages above: %.1f collectives of %.1f KB per call, "
                  "%.1f us each)\n",
                  ms, 100 * ms / fwd_ms, double(t.comm_calls) / calls, kb,
                  double(t.comm_ns) / 1e3 / double(t.comm_calls));
      out[phase]["communication"] = {{"ms", ms},
                                     {"share", ms / fwd_ms},
                                     {"collectives", double(t.comm_calls) / calls},
                                     {"kb_per_collective", kb},
                                     {"us_per_collective", double(t.comm_ns) / 1e3 / double(t.comm_calls)}};
    }
  }
  return out;
}


}  // namespace rinfer::cli

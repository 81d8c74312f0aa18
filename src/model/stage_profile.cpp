#include "model/stage_profile.h"

#include <mutex>

#include "ops/ops.h"

namespace rinfer::profile {

namespace {
// Written by the thread running forward; read by bench after the samples.
// The mutex is taken only while profiling is on.
std::mutex g_mutex;
PhaseTotals g_totals[size_t(Phase::kCount)];
Phase g_phase = Phase::Decode;
}  // namespace

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::Embed: return "embed";
    case Stage::Norm: return "norm";
    case Stage::Qkv: return "qkv";
    case Stage::AttnPrep: return "rope+kv-store";
    case Stage::Attention: return "attention";
    case Stage::AttnOut: return "attn-out";
    case Stage::Residual: return "residual";
    case Stage::Router: return "moe-router";
    case Stage::GateUp: return "gate-up";
    case Stage::Activation: return "activation";
    case Stage::Down: return "down";
    case Stage::MoeCombine: return "moe-combine";
    case Stage::LmHead: return "lm-head";
    case Stage::kCount: break;
  }
  return "?";
}

const char* phase_name(Phase p) { return p == Phase::Prefill ? "prefill" : "decode"; }

void reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& t : g_totals) t = PhaseTotals{};
}

void set_enabled(bool on) {
  reset();
  ThreadPool::set_stats(on);
  g_enabled.store(on, std::memory_order_relaxed);
}

void set_recording(bool on) {
  ThreadPool::set_stats(on);
  g_enabled.store(on, std::memory_order_relaxed);
}

PhaseTotals totals(Phase p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_totals[size_t(p)];
}

void set_phase(Phase p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_phase = p;
}

uint64_t macs_now() { return ops::matmul_macs(); }

void add(Stage s, uint64_t ns, uint64_t bytes, uint64_t macs, uint64_t busy_ns) {
  std::lock_guard<std::mutex> lock(g_mutex);
  StageTotals& t = g_totals[size_t(g_phase)].stages[size_t(s)];
  t.ns += ns;
  t.busy_ns += busy_ns;
  t.calls += 1;
  t.bytes += bytes;
  t.macs += macs;
}

void add_comm(uint64_t ns, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  PhaseTotals& t = g_totals[size_t(g_phase)];
  t.comm_ns += ns;
  t.comm_calls += 1;
  t.comm_bytes += bytes;
}

void add_forward(uint64_t ns) {
  std::lock_guard<std::mutex> lock(g_mutex);
  PhaseTotals& t = g_totals[size_t(g_phase)];
  t.forwards += 1;
  t.forward_ns += ns;
}

}  // namespace rinfer::profile

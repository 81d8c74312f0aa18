#include "model/feed_forward.h"

#include "model/stage_profile.h"

namespace rinfer {

GatedMLP GatedMLP::load(const WeightStore& w, const std::string& prefix, int64_t hidden, int64_t inter,
                        const char* gate, const char* up, const char* down, bool bias) {
  return GatedMLP(Linear::load(w, prefix + gate, hidden, inter, bias), Linear::load(w, prefix + up, hidden, inter, bias),
                  Linear::load(w, prefix + down, inter, hidden, bias));
}

void GatedMLP::forward(const float* h, int64_t T, float* out, Workspace& ws, ThreadPool& pool) {
  const int64_t I = gate_.out;
  float* g = ws.get(Workspace::kGate, size_t(T * I));
  float* u = ws.get(Workspace::kUp, size_t(T * I));
  if (gate_.quantized && up_.quantized && gate_.in == up_.in) {
    // silu(gate) * up: in the prefill GEMM's tiles, so the activation's
    // time is gate-up's there (matmul_q_gate_up_silu); u is the other
    // paths' scratch.
    profile::Scope s(profile::Stage::GateUp, [&] { return gate_.bytes() + up_.bytes(); });
    kernels::cpu::matmul_q_gate_up_silu(h, T, gate_.in, gate_.in, {&gate_.qweight, gate_.bias, g, I},
                                        {&up_.qweight, up_.bias, u, I}, pool);
  } else {
    {
      profile::Scope s(profile::Stage::GateUp, [&] { return gate_.bytes() + up_.bytes(); });
      forward_linears(h, T, {{&gate_, g}, {&up_, u}}, pool);
    }
    profile::Scope s(profile::Stage::Activation);
    for_rows(pool, T,
             [&](int64_t r0, int64_t r1) { kernels::cpu::silu_mul(g + r0 * I, u + r0 * I, g + r0 * I, (r1 - r0) * I); });
  }
  profile::Scope s(profile::Stage::Down, [&] { return down_.bytes(); });
  down_.forward(g, T, out, pool);
}

}  // namespace rinfer

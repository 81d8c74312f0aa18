#include "model/feed_forward.h"

#include <numeric>

#include "core/error.h"
#include "model/stage_profile.h"

namespace rinfer {

GatedMLP GatedMLP::load(const WeightStore& w, const std::string& prefix, int64_t hidden, int64_t inter,
                        const char* gate, const char* up, const char* down, bool bias, const Shard& shard) {
  if (shard.whole())
    return GatedMLP(Linear::load(w, prefix + gate, hidden, inter, bias),
                    Linear::load(w, prefix + up, hidden, inter, bias),
                    Linear::load(w, prefix + down, inter, hidden, bias));
  // The width is cut where gate's and up's row blocks and down's column
  // units all end.
  const Linear whole_gate = Linear::load(w, prefix + gate, hidden, inter, false);
  const Linear whole_down = Linear::load(w, prefix + down, inter, hidden, false);
  const int64_t a = ops::matrix_row_unit(whole_gate.matrix()), b = ops::matrix_column_unit(whole_down.matrix());
  const int64_t unit = a / std::gcd(a, b) * b;
  RINFER_CHECK((inter + unit - 1) / unit >= shard.world, "tensor parallelism: the ", inter, " columns of ", prefix,
               down, " do not split over ", shard.world, " ranks on its ", unit,
               "-column units (quantization groups: convert with a smaller --group-size)");
  const Range part = shard_range(inter, shard, unit);
  return GatedMLP(Linear::load_rows(w, prefix + gate, hidden, inter, bias, part),
                  Linear::load_rows(w, prefix + up, hidden, inter, bias, part),
                  Linear::load_columns(w, prefix + down, inter, hidden, bias, part, shard));
}

void GatedMLP::forward(const float* h, int64_t T, float* out, const ForwardContext& ctx) { run(h, T, out, ctx, true); }

void GatedMLP::forward_partial(const float* h, int64_t T, float* out, const ForwardContext& ctx) {
  run(h, T, out, ctx, false);
}

void GatedMLP::run(const float* h, int64_t T, float* out, const ForwardContext& ctx, bool reduce) {
  const int64_t I = gate_.out();
  Workspace& ws = *ctx.ws;
  float* g = ws.get(Workspace::kGate, size_t(T * I));
  float* u = ws.get(Workspace::kUp, size_t(T * I));
  if (ops::gate_up_silu_fused(gate_.matrix(), up_.matrix())) {
    // silu(gate) * up in the GEMM's tiles: the activation's time is gate-up's.
    profile::Scope s(profile::Stage::GateUp, [&] { return gate_.bytes() + up_.bytes(); });
    ops::gate_up_silu(ctx.exec, h, T, gate_.in(), {&gate_.matrix(), gate_.bias(), g, I},
                      {&up_.matrix(), up_.bias(), u, I});
  } else {
    {
      profile::Scope s(profile::Stage::GateUp, [&] { return gate_.bytes() + up_.bytes(); });
      forward_linears(ctx, h, T, {{&gate_, g}, {&up_, u}});
    }
    profile::Scope s(profile::Stage::Activation);
    for_rows(ctx.exec, T, [&](int64_t r0, int64_t r1) { ops::silu_mul(g + r0 * I, u + r0 * I, g + r0 * I, (r1 - r0) * I); });
  }
  profile::Scope s(profile::Stage::Down, [&] { return down_.bytes(); });
  if (reduce)
    down_.forward(ctx, g, T, out);
  else
    down_.forward_partial(ctx, g, T, out);
}

}  // namespace rinfer

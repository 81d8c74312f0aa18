#pragma once
// Dense SwiGLU feed-forward: down(silu(gate(x)) * up(x)).
#include <string>

#include "model/blocks.h"
#include "model/layers.h"

namespace rinfer {

class GatedMLP : public FeedForwardBlock {
 public:
  GatedMLP() = default;
  GatedMLP(Linear gate, Linear up, Linear down) : gate_(gate), up_(up), down_(down) {}
  // prefix + gate_name etc., e.g. ("model.layers.0.mlp.", "gate_proj", "up_proj", "down_proj"),
  // whole or the shard's part of the width: gate and up column-parallel,
  // down row-parallel over the same range.
  static GatedMLP load(const WeightStore& w, const std::string& prefix, int64_t hidden, int64_t inter,
                       const char* gate = "gate_proj", const char* up = "up_proj", const char* down = "down_proj",
                       bool bias = false, const Shard& shard = {});
  void forward(const float* h, int64_t n_tokens, float* out, const ForwardContext& ctx) override;
  // forward() leaving a sharded down's partial sum unreduced (Linear::forward_partial).
  void forward_partial(const float* h, int64_t n_tokens, float* out, const ForwardContext& ctx);
  bool reduces() const { return down_.reduces(); }
  uint64_t weight_bytes_per_token() const override { return gate_.bytes() + up_.bytes() + down_.bytes(); }
  int64_t intermediate() const { return gate_.out(); }

 private:
  void run(const float* h, int64_t n_tokens, float* out, const ForwardContext& ctx, bool reduce);
  Linear gate_, up_, down_;
};

}  // namespace rinfer

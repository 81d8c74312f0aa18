// Dynamic NTK RoPE: beyond the trained length the base grows with the
// sequence length (as HF's dynamic rotary embedding does); within it, nothing changes.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/ops.h"
#include "model/layers.h"

namespace rinfer {
namespace {

TEST(RopeScaling, DynamicNtkFollowsSequenceLength) {
  ModelConfig c;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 64;
  c.rope_scaling.type = "dynamic";
  c.rope_scaling.factor = 2.0;
  const int64_t D = 8;
  RotaryEmbedding rope(c, D, kernels::cpu::RopeStyle::RotateHalf);
  auto rotate = [&](const std::vector<float>& inv, int64_t pos) {
    std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
    kernels::cpu::rope(v.data(), 1, D, D, pos, inv.data(), kernels::cpu::RopeStyle::RotateHalf, 1.0f);
    return v;
  };
  for (int64_t seq_len : {10, 64, 100, 100, 300, 100}) {  // repeats check the per-length cache
    std::vector<float> got = {1, 2, 3, 4, 5, 6, 7, 8};
    rope.apply(got.data(), 1, D, 50, seq_len);
    double base = c.rope_theta;
    if (seq_len > c.max_position_embeddings)
      base *= std::pow(2.0 * double(seq_len) / 64.0 - 1.0, double(D) / double(D - 2));
    const auto want = rotate(rope_inv_freq(base, D, RopeScaling{}), 50);
    for (int64_t i = 0; i < D; ++i) EXPECT_NEAR(got[size_t(i)], want[size_t(i)], 1e-5) << "seq_len " << seq_len;
  }
}

}  // namespace
}  // namespace rinfer

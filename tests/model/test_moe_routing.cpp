// Routing rules of the MoE families, on hand-made router outputs.
#include <gtest/gtest.h>

#include <cmath>

#include "model/moe.h"

namespace rinfer {
namespace {

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(const MoeRouting& r, std::vector<float> logits, const std::vector<float>& bias = {}) {
  Routed out{std::vector<int32_t>(size_t(r.top_k)), std::vector<float>(size_t(r.top_k))};
  std::vector<float> scratch(size_t(2 * r.n_experts));
  route_token(r, logits.data(), bias.empty() ? nullptr : bias.data(), out.experts.data(), out.weights.data(),
              scratch.data());
  return out;
}

TEST(MoeRouting, SoftmaxTopKRenormalized) {  // Mixtral
  MoeRouting r{4, 2, false, true, 1.0f, false, 1, 1, false};
  auto o = route(r, {0.0f, 2.0f, 1.0f, -1.0f});
  EXPECT_EQ(o.experts, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(o.weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(o.weights[0] + o.weights[1], 1.0, 1e-6);
}

TEST(MoeRouting, SoftmaxNotRenormalizedKeepsFullSoftmaxWeights) {  // Qwen2-MoE, DeepSeek-MoE
  MoeRouting r{3, 1, false, false, 1.0f, false, 1, 1, false};
  auto o = route(r, {0.0f, 0.0f, std::log(2.0f)});
  EXPECT_EQ(o.experts[0], 2);
  EXPECT_NEAR(o.weights[0], 0.5, 1e-6);  // 2 / (1 + 1 + 2)
}

TEST(MoeRouting, V2ScalesOnlyUnnormalizedWeights) {
  MoeRouting r{3, 1, false, false, 16.0f, true, 1, 1, false};
  EXPECT_NEAR(route(r, {0.0f, 0.0f, std::log(2.0f)}).weights[0], 8.0, 1e-5);
  r.norm_topk_prob = true;
  EXPECT_NEAR(route(r, {0.0f, 0.0f, std::log(2.0f)}).weights[0], 1.0, 1e-5);
}

TEST(MoeRouting, V3BiasSelectsButDoesNotWeight) {
  MoeRouting r{4, 1, true, false, 2.5f, false, 1, 1, true};
  // Expert 0 has the best score, but the correction bias makes expert 3 win.
  auto o = route(r, {2.0f, 0.0f, 0.0f, 1.0f}, {0.0f, 0.0f, 0.0f, 2.0f});
  EXPECT_EQ(o.experts[0], 3);
  EXPECT_NEAR(o.weights[0], 2.5 / (1.0 + std::exp(-1.0)), 1e-6);  // unbiased sigmoid x scaling
}

TEST(MoeRouting, GroupLimitKeepsBestGroupsByTopTwoSum) {
  // 4 groups of 2 experts; keep 1 group. Group scores (sum of its 2 best):
  // g0 = s0 + s1, g1 = s2 + s3 ... Expert 2 alone is the best expert, but
  // group 0 has the best pair, so the top-2 must come from group 0.
  MoeRouting r{8, 2, true, false, 1.0f, false, 4, 1, true};
  auto o = route(r, {2.0f, 2.0f, 3.0f, -4.0f, -4.0f, -4.0f, -4.0f, -4.0f});
  EXPECT_EQ(o.experts, (std::vector<int32_t>{0, 1}));
  // Ranked by the max instead (V2 group_limited_greedy), group 1 wins.
  r.group_score_top2_sum = false;
  r.top_k = 1;
  EXPECT_EQ(route(r, {2.0f, 2.0f, 3.0f, -4.0f, -4.0f, -4.0f, -4.0f, -4.0f}).experts[0], 2);
}

}  // namespace
}  // namespace rinfer

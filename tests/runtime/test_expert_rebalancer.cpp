// The online expert rebalancer (runtime/expert_rebalancer.h) on a model
// that only counts: it looks every `every` steps, plans from the loads of
// a moving window of periods, moves only the layers where the plan clearly
// beats the placement in force, keeps each rank's slot count, and measures
// each period's balancedness from the pairs each rank computed.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "runtime/expert_rebalancer.h"

namespace rinfer {
namespace {

// Two layers: layer 0 dense, layer 1 with 8 experts over 2 ranks.
class CountingModel : public Model {
 public:
  std::vector<std::vector<uint64_t>> counts{{}, std::vector<uint64_t>(8, 0)};
  std::vector<std::vector<uint64_t>> rank_tokens{{}, {0, 0}};
  std::vector<ExpertPlan> placed;
  const ModelConfig& config() const override { return cfg_; }
  KVCacheShape kv_shape() const override { return {}; }
  void forward(std::span<const BatchItem>, const KvView&, float*, const RunContext&) override {}
  uint64_t weight_bytes_per_token() const override { return 0; }
  std::vector<std::vector<uint64_t>> expert_counts() const override { return counts; }
  std::vector<std::vector<uint64_t>> expert_rank_tokens() const override { return rank_tokens; }
  void place_experts(const ExpertPlan& plan) override { placed.push_back(plan); }
  // One step in which expert e gets load[e] tokens, computed by the rank
  // that holds it in `p` (no replicas).
  void step(const std::vector<uint64_t>& load, const LayerPlacement& p) {
    for (size_t e = 0; e < load.size(); ++e) {
      counts[1][e] += load[e];
      for (size_t r = 0; r < p.rank_experts.size(); ++r)
        for (int32_t x : p.rank_experts[r])
          if (size_t(x) == e) rank_tokens[1][r] += load[e];
    }
  }

 private:
  ModelConfig cfg_;
};

TEST(ExpertRebalancer, MovesOnlyWhenThePlanBeatsThePlacementInForce) {
  CountingModel m;
  const ExpertPlan initial{"", 2, 0, {}};  // contiguous: experts 0-3 on rank 0, 4-7 on rank 1
  ExpertRebalancer rb(m, initial, 3);
  const LayerPlacement contiguous = initial.layer(1, 8);
  // Even loads: nothing to gain, nothing moves.
  for (int i = 0; i < 3; ++i) {
    m.step({5, 5, 5, 5, 5, 5, 5, 5}, contiguous);
    EXPECT_FALSE(rb.after_step(m)) << "step " << i;
  }
  EXPECT_TRUE(m.placed.empty());
  EXPECT_DOUBLE_EQ(rb.window_balancedness().at(1), 1.0);
  // Rank 0's experts hot: on the third step the layer moves.
  for (int i = 0; i < 3; ++i) {
    m.step({40, 30, 20, 10, 1, 1, 1, 1}, contiguous);
    EXPECT_EQ(rb.after_step(m), i == 2) << "step " << i;
  }
  ASSERT_EQ(m.placed.size(), 1u);
  ASSERT_EQ(m.placed[0].layers.count(1), 1u);
  EXPECT_EQ(m.placed[0].layers.count(0), 0u);  // the dense layer is never placed
  const LayerPlacement& moved = m.placed[0].layers.at(1);
  EXPECT_EQ(moved.rank_experts[0].size(), 4u);  // same slots per rank
  EXPECT_EQ(moved.rank_experts[1].size(), 4u);
  // Planned from the window: the even steps and the skewed ones.
  const std::vector<double> window{135, 105, 75, 45, 18, 18, 18, 18};
  EXPECT_GT(balancedness(rank_loads(moved, window)), 0.95);
  // Measured over the window under the contiguous placement: 300 vs 12.
  EXPECT_NEAR(rb.window_balancedness().at(1), (312.0 / 2) / 300.0, 1e-12);
  EXPECT_EQ(rb.rebalances(), 1);
  EXPECT_GT(rb.experts_moved(), 0);
  EXPECT_EQ(rb.placement(1).rank_experts, moved.rank_experts);
  // The same skew again: the plan in force already carries it, no move.
  for (int i = 0; i < 3; ++i) {
    m.step({40, 30, 20, 10, 1, 1, 1, 1}, moved);
    EXPECT_FALSE(rb.after_step(m));
  }
  EXPECT_EQ(m.placed.size(), 1u);
}

TEST(ExpertRebalancer, KeepsTheReplicaCountOfTheInitialPlacement) {
  CountingModel m;
  const ExpertPlan initial{"", 2, 2, {}};  // 8 experts + 2 replicas over 2 ranks: 5 slots each
  ExpertRebalancer rb(m, initial, 1);
  m.step({1, 1, 1, 1, 1, 1, 1, 100}, initial.layer(1, 8));  // even loads replicated 0 and 1
  rb.after_step(m);
  ASSERT_EQ(m.placed.size(), 1u);
  const LayerPlacement& p = m.placed[0].layers.at(1);
  EXPECT_EQ(p.rank_experts[0].size(), 5u);
  EXPECT_EQ(p.rank_experts[1].size(), 5u);
  EXPECT_EQ(p.replicas[7], 2);  // the hot expert on both ranks
}

TEST(ExpertRebalancer, ADenseModelOrAZeroPeriodIsAnError) {
  CountingModel m;
  EXPECT_THROW(ExpertRebalancer(m, ExpertPlan{"", 2, 0, {}}, 0), Error);
  m.counts = {{}, {}};
  EXPECT_THROW(ExpertRebalancer(m, ExpertPlan{"", 2, 0, {}}, 5), Error);
}

}  // namespace
}  // namespace rinfer

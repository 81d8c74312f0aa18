// The expert placement planner and the load-aware replica router
// (parallel/expert_placement.h) on synthetic loads: every expert placed,
// equal slots per rank, the greedy packing's balance bound, replicas for
// the hottest experts, groups kept on their ranks, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

#include "core/error.h"
#include "parallel/expert_placement.h"

namespace rinfer {
namespace {

// Zipf-like loads: expert e gets 1000 / (1 + e)^s tokens, shuffled
// deterministically so the hot experts are not all in one contiguous range.
std::vector<double> skewed(int E, double s) {
  std::vector<double> w(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) w[size_t((e * 7) % E)] = 1000.0 / std::pow(1.0 + e, s);
  return w;
}

void check_valid(const LayerPlacement& p, const std::vector<double>& loads, int ranks, int redundant) {
  const size_t E = loads.size();
  ASSERT_EQ(p.rank_experts.size(), size_t(ranks));
  std::vector<int> copies(E, 0);
  for (const auto& r : p.rank_experts) {
    EXPECT_EQ(r.size(), (E + size_t(redundant)) / size_t(ranks));  // equal slots
    for (int32_t e : r) ++copies[size_t(e)];
    EXPECT_EQ(std::set<int32_t>(r.begin(), r.end()).size(), r.size()) << "two replicas of one expert on a rank";
  }
  for (size_t e = 0; e < E; ++e) {
    EXPECT_GE(copies[e], 1) << "expert " << e << " on no rank";
    EXPECT_EQ(copies[e], p.replicas[e]);
  }
  EXPECT_EQ(std::accumulate(p.replicas.begin(), p.replicas.end(), 0), int(E) + redundant);
  // The predicted loads add up to the measured ones.
  EXPECT_NEAR(std::accumulate(p.rank_load.begin(), p.rank_load.end(), 0.0),
              std::accumulate(loads.begin(), loads.end(), 0.0), 1e-6);
}

TEST(ExpertPlacement, BalancedWithinTheGreedyBound) {
  for (int ranks : {2, 4, 8})
    for (int redundant : {0, ranks, 2 * ranks}) {
      SCOPED_TRACE(testing::Message() << ranks << " ranks, " << redundant << " redundant");
      const auto loads = skewed(64, 1.2);
      const LayerPlacement p = plan_layer(loads, {ranks, redundant});
      check_valid(p, loads, ranks, redundant);
      // Heaviest-first packing: no rank exceeds the mean by more than the
      // heaviest physical expert (its load / its replicas).
      double heaviest = 0;
      for (size_t e = 0; e < loads.size(); ++e) heaviest = std::max(heaviest, loads[e] / p.replicas[e]);
      const double mean = std::accumulate(loads.begin(), loads.end(), 0.0) / ranks;
      EXPECT_LE(*std::max_element(p.rank_load.begin(), p.rank_load.end()), mean + heaviest + 1e-9);
      // Better than (or as good as) experts in contiguous ranges.
      EXPECT_GE(p.balancedness(), contiguous_layer(loads, ranks).balancedness() - 1e-12);
    }
  // The figures docs/families.md states: 64 experts, Zipf 1.2, 4 ranks.
  const auto loads = skewed(64, 1.2);
  const double contiguous = contiguous_layer(loads, 4).balancedness(), r0 = plan_layer(loads, {4, 0}).balancedness(),
               r4 = plan_layer(loads, {4, 4}).balancedness(), r8 = plan_layer(loads, {4, 8}).balancedness();
  std::printf("[ placement ] 64 experts, Zipf 1.2, 4 ranks: balancedness contiguous %.3f, planned with 0 / 4 / 8 "
              "redundant %.3f / %.3f / %.3f\n",
              contiguous, r0, r4, r8);
  EXPECT_LT(contiguous, 0.7);
  EXPECT_GT(r4, 0.9);
  EXPECT_GT(r8, 0.95);
}

TEST(ExpertPlacement, RedundantSlotsGoToTheHeaviestPerReplica) {
  // Loads 100, 40, 10, 10 on 2 ranks: the first slot to expert 0 (100 / 1);
  // it then has a replica on both ranks, so the next goes to expert 1.
  const LayerPlacement p = plan_layer({100, 40, 10, 10}, {2, 2});
  EXPECT_EQ(p.replicas, (std::vector<int32_t>{2, 2, 1, 1}));
  // On 4 ranks: expert 0 (100), expert 0 again (100 / 2 = 50 > 40), then
  // expert 1 (40 > 100 / 3), then expert 0 (100 / 3 > 40 / 2).
  const LayerPlacement q = plan_layer({100, 40, 10, 10}, {4, 4});
  EXPECT_EQ(q.replicas, (std::vector<int32_t>{4, 2, 1, 1}));
  // A replica goes to a rank without the same expert while one has room.
  for (const auto& r : q.rank_experts) EXPECT_EQ(std::set<int32_t>(r.begin(), r.end()).size(), r.size());
}

TEST(ExpertPlacement, DeterministicAndIndependentOfNothingElse) {
  const auto loads = skewed(32, 1.0);
  const LayerPlacement a = plan_layer(loads, {4, 4}), b = plan_layer(loads, {4, 4});
  EXPECT_EQ(a.rank_experts, b.rank_experts);
  EXPECT_EQ(a.rank_load, b.rank_load);
}

TEST(ExpertPlacement, GroupLimitedKeepsGroupsOnTheirRanks) {
  // 16 experts in 4 groups of 4, 8 ranks in 4 sets of 2: every rank's
  // experts, replicas included, come from its set's group only.
  const auto loads = skewed(16, 1.0);
  PlacementOptions o{8, 8, 4, true};
  const LayerPlacement p = plan_layer(loads, o);
  check_valid(p, loads, 8, 8);
  std::set<int> all;
  for (int set = 0; set < 4; ++set) {
    std::set<int> groups;
    for (int r = set * 2; r < set * 2 + 2; ++r)
      for (int32_t e : p.rank_experts[size_t(r)]) groups.insert(e / 4);
    EXPECT_EQ(groups.size(), 1u) << "set " << set;
    all.insert(groups.begin(), groups.end());
  }
  EXPECT_EQ(all.size(), 4u);
}

TEST(ExpertPlacement, ImpossibleLayoutsAreOneLineErrors) {
  auto error_of = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of([] { plan_layer(std::vector<double>(10, 1.0), {4, 0}); }),
            "10 experts + 0 redundant do not fill 4 ranks evenly (make experts + redundant a multiple of the ranks)");
  EXPECT_NE(error_of([] { plan_layer({1, 2, -3, 4}, {2, 0}); }).find("negative expert load"), std::string::npos);
  // 4 experts on 2 ranks have room for 4 replicas at most (one per rank).
  EXPECT_EQ(error_of([] { plan_layer({1, 2, 3, 4}, {2, 6}); }),
            "6 redundant experts are more than 4 experts can have on 2 ranks (one replica per rank)");
  EXPECT_NE(error_of([] { plan_layer(std::vector<double>(16, 1.0), {4, 0, 3, true}); }).find("groups"),
            std::string::npos);
}

// One very hot expert: it gets a replica on every rank and no more; the
// next redundant slots go to the next heaviest per replica.
TEST(ExpertPlacement, AtMostOneReplicaPerRank) {
  std::vector<double> loads(8, 1.0);
  loads[7] = 1000;
  const LayerPlacement p = plan_layer(loads, {2, 4});
  check_valid(p, loads, 2, 4);
  EXPECT_EQ(p.replicas[7], 2);
  EXPECT_EQ(p.replicas[0] + p.replicas[1] + p.replicas[2], 6);  // ties to the lower ids
}

TEST(ReplicaRouter, SendsATokenToTheLeastLoadedReplica) {
  // Expert 0 on ranks 0 and 1, expert 1 on rank 0, expert 2 on rank 1.
  LayerPlacement p;
  p.rank_experts = {{0, 1}, {0, 2}};
  p.replicas = {2, 1, 1};
  ReplicaRouter router(p);
  router.begin_step();
  EXPECT_EQ(router.route(1), 0);  // only on rank 0
  EXPECT_EQ(router.route(0), 1);  // rank 1 has fewer tokens (0 < 1)
  EXPECT_EQ(router.route(0), 0);  // tie 1:1 -> the lower rank
  EXPECT_EQ(router.route(0), 1);
  EXPECT_EQ(router.rank_tokens(), (std::vector<int64_t>{2, 2}));
  router.begin_step();
  EXPECT_EQ(router.route(0), 0);  // a new step starts even
  // An expert on no rank cannot be routed.
  LayerPlacement missing;
  missing.rank_experts = {{0}, {0}};
  missing.replicas = {2, 0};
  EXPECT_THROW(ReplicaRouter{missing}, Error);
}

}  // namespace
}  // namespace rinfer

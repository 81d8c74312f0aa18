// Metrics::render on engine statistics a split model reports: the
// pipeline's bubble and, with expert parallelism, each rank's expert tokens
// and each layer's balancedness (and the online rebalancer's moves and
// window), as Prometheus text.
#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "server/metrics.h"

namespace rinfer {
namespace {

TEST(Metrics, ExpertParallelLoadsAndBalance) {
  EngineStats s;
  s.expert_rank_tokens = {{}, {30, 10}, {20, 20}};  // layer 0 dense
  const std::string m = server::Metrics().render(s);
  EXPECT_NE(m.find("rinfer_expert_rank_tokens_total{layer=\"1\",rank=\"0\"} 30\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rinfer_expert_rank_tokens_total{layer=\"1\",rank=\"1\"} 10\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rinfer_expert_balancedness{layer=\"1\"} 0.666666667\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rinfer_expert_balancedness{layer=\"2\"} 1\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("layer=\"0\""), std::string::npos) << m;
  EXPECT_EQ(m.find("rinfer_pipeline"), std::string::npos) << m;
}

TEST(Metrics, OnlineRebalancing) {
  EngineStats s;
  s.expert_rank_tokens = {{}, {30, 10}};
  s.rebalancing = true;
  s.expert_rebalances = 3;
  s.experts_moved = 7;
  s.expert_window_balancedness = {{1, 0.8}};
  const std::string m = server::Metrics().render(s);
  EXPECT_NE(m.find("rinfer_expert_rebalances_total 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rinfer_expert_moves_total 7\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rinfer_expert_window_balancedness{layer=\"1\"} 0.8\n"), std::string::npos) << m;
  s.rebalancing = false;
  EXPECT_EQ(server::Metrics().render(s).find("rinfer_expert_rebalances_total"), std::string::npos);
}

TEST(Metrics, PipelineBubble) {
  EngineStats s;
  s.pipeline_stages = 2;
  s.micro_batches = 4;
  s.pipeline_wall_s = 10;
  s.pipeline_busy_s = 15;
  s.pipeline_bubble_fraction = 0.25;
  const std::string m = server::Metrics().render(s);
  EXPECT_NE(m.find("rinfer_pipeline_stages 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rinfer_pipeline_micro_batches 4\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rinfer_pipeline_bubble_fraction 0.25\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("rinfer_expert"), std::string::npos) << m;
}

}  // namespace
}  // namespace rinfer

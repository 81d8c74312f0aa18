#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"

namespace rinfer {
namespace {

TEST(Sampler, GreedyPicksMaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

TEST(Sampler, SameSeedSameDraws) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<int32_t> a, b;
  for (auto* out : {&a, &b}) {
    Sampler s(p);
    for (int i = 0; i < 50; ++i) {
      std::vector<float> l = {1.0f, 1.1f, 0.9f, 1.05f, 0.2f};
      out->push_back(s.sample(l.data(), 5, {}));
    }
  }
  EXPECT_EQ(a, b);
  p.seed = 43;
  Sampler s(p);
  std::vector<int32_t> c;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l = {1.0f, 1.1f, 0.9f, 1.05f, 0.2f};
    c.push_back(s.sample(l.data(), 5, {}));
  }
  EXPECT_NE(a, c);
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 7;
  Sampler s(p);
  std::map<int, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = {0.0f, 0.5f, 1.0f};
    ++count[s.sample(l.data(), 3, {})];
  }
  // softmax([0, 1, 2]) = 0.090, 0.245, 0.665
  EXPECT_NEAR(count[0] / double(n), 0.090, 0.01);
  EXPECT_NEAR(count[1] / double(n), 0.245, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.665, 0.015);
}

TEST(Sampler, TopKAndTopPRestrictTheSet) {
  SamplingParams p;
  p.seed = 3;
  p.top_k = 2;
  Sampler k(p);
  for (int i = 0; i < 500; ++i) {
    std::vector<float> l = {2.0f, 1.9f, 1.8f, 1.7f};
    int id = k.sample(l.data(), 4, {});
    EXPECT_TRUE(id == 0 || id == 1);
  }
  p.top_k = 0;
  p.top_p = 0.5f;  // probabilities 0.64, 0.24, 0.09, ... : only id 0 survives
  Sampler tp(p);
  for (int i = 0; i < 500; ++i) {
    std::vector<float> l = {3.0f, 2.0f, 1.0f, 0.0f};
    EXPECT_EQ(tp.sample(l.data(), 4, {}), 0);
  }
}

TEST(Sampler, RepetitionPenaltyOncePerToken) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l = {3.0f, 2.0f, -1.0f};
  std::vector<int32_t> hist = {0, 0, 0, 2};
  EXPECT_EQ(s.sample(l.data(), 3, hist), 1);  // 3/2 = 1.5 < 2
  EXPECT_FLOAT_EQ(l[0], 1.5f);                // not 3/8
  EXPECT_FLOAT_EQ(l[2], -2.0f);
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.top_p = 0;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.top_p = 1.5f;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.repetition_penalty = 0;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.temperature = NAN;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace rinfer

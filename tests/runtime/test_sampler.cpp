#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace rinfer {
namespace {

TEST(Sampler, GreedyPicksMaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

// Non-finite logits are reported by the caller after the draw; the draw
// itself must stay within its tables (a NaN with the sign bit set once
// indexed past top-p's histograms, caught by UBSan).
TEST(Sampler, NonFiniteLogitsStayInBounds) {
  for (float bad : {-std::nanf(""), std::nanf(""), INFINITY, -INFINITY}) {
    for (float top_p : {1.0f, 0.9f}) {
      SamplingParams p;
      p.temperature = 0.8f;
      p.top_p = top_p;
      p.seed = 1;
      Sampler s(p);
      std::vector<float> l = {0.5f, bad, 1.0f, -2.0f, bad, 0.25f};
      const int32_t id = s.sample(l.data(), int64_t(l.size()), {});
      EXPECT_GE(id, -1);
      EXPECT_LT(id, int32_t(l.size()));
    }
  }
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

// The definition top-p keeps: the most probable tokens (ties to the lower
// id) up to the first whose running share reaches top_p.
std::vector<int32_t> top_p_set(const std::vector<float>& logits, float temperature, float top_p) {
  const int64_t n = int64_t(logits.size());
  std::vector<float> p(logits.size());
  kernels::cpu::softmax_tempered(logits.data(), n, temperature, p.data());
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  double total = 0, cum = 0;
  for (float v : p) total += v;
  size_t keep = idx.size();
  for (size_t i = 0; i < idx.size(); ++i)
    if ((cum += p[idx[i]] / total) >= top_p) {
      keep = i + 1;
      break;
    }
  idx.resize(keep);
  return idx;
}

TEST(Sampler, TopPOverALargeVocabularyKeepsTheDefinedSet) {
  // 4000 tokens: one of probability about 0.7, the rest spread thinly
  // (each well under the first threshold, 2^-8), so the sorted prefix has
  // to grow several times before it reaches top_p; also top_p past all but
  // the last tokens, and a flat vocabulary.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
  const int64_t n = 4000;
  for (float top_p : {0.5f, 0.9f, 0.9999f}) {
    for (bool flat : {false, true}) {
      std::vector<float> logits(static_cast<size_t>(n));
      for (auto& l : logits) l = noise(rng);
      if (!flat) logits[1234] = 9.2f;  // e^9.2 against about 4000 * 1.18
      const auto set = top_p_set(logits, 1.0f, top_p);
      std::vector<char> kept(static_cast<size_t>(n), 0);
      for (int32_t id : set) kept[size_t(id)] = 1;
      SamplingParams p;
      p.temperature = 1.0f;
      p.top_p = top_p;
      p.seed = 11;
      Sampler s(p);
      int top = 0;
      const int draws = 1500;
      for (int i = 0; i < draws; ++i) {
        std::vector<float> l = logits;
        const int32_t id = s.sample(l.data(), n, {});
        ASSERT_TRUE(id >= 0 && id < n && kept[size_t(id)])
            << "token " << id << " is outside the top-p set of " << set.size() << " (top_p " << top_p << ")";
        top += id == 1234;
      }
      if (!flat && set.size() > 1) {
        // The top token's share of the kept set's probability.
        std::vector<float> pr(static_cast<size_t>(n));
        kernels::cpu::softmax_tempered(logits.data(), n, 1.0f, pr.data());
        double kept_mass = 0;
        for (int32_t id : set) kept_mass += pr[size_t(id)];
        EXPECT_NEAR(top / double(draws), pr[1234] / kept_mass, 0.045) << "top_p " << top_p;  // 4 standard errors
      }
    }
  }
}

TEST(Sampler, FullVocabularyDrawFollowsSoftmax) {
  // No top-k or top-p: the walk goes in id order over blocks of 256. A ramp
  // of logits over 1000 tokens; the draws' mean id against the softmax's.
  const int64_t n = 1000;
  std::vector<float> logits(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) logits[size_t(i)] = float(i) * 0.004f;
  std::vector<float> pr(static_cast<size_t>(n));
  kernels::cpu::softmax_tempered(logits.data(), n, 1.0f, pr.data());
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += double(i) * pr[size_t(i)];
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 4;
  Sampler s(p);
  const int draws = 20000;
  double got = 0;
  std::vector<int> hist(4, 0);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    const int32_t id = s.sample(l.data(), n, {});
    ASSERT_TRUE(id >= 0 && id < n);
    got += id;
    ++hist[size_t(id / 250)];
  }
  EXPECT_NEAR(got / draws, mean, 6.0);  // the ids' standard deviation is about 290: 4 standard errors
  for (int q = 0; q < 4; ++q) {
    double want = 0;
    for (int64_t i = q * 250; i < (q + 1) * 250; ++i) want += pr[size_t(i)];
    EXPECT_NEAR(hist[size_t(q)] / double(draws), want, 0.015) << "quarter " << q;
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

// Speculative sampling keeps the target's distribution: chi-square tests of
// the tokens that come out against the exact distribution, for the
// acceptance rule on its own (draft and target distributions chosen to
// stress it, including deliberately wrong rules that the same test must
// reject), for Sampler::distribution against Sampler::sample, and end to
// end for a Generator with a sampled draft model (stories260K drafted by
// its own int4 copy and by a random model of its tokenizer). Every draw is
// seeded: the tests are deterministic.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "loading/model_loader.h"
#include "runtime/draft_model.h"
#include "runtime/generator.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "runtime/speculative_sampling.h"
#include "test_util.h"

namespace rinfer {
namespace {

// Pearson's statistic over the cells whose expected count is at least 5
// (the rest pooled into one cell), with its degrees of freedom. A count in
// a cell of probability 0 is a failure of its own (returned as infinity).
struct ChiSquare {
  double stat = 0;
  int df = 0;
  // The upper 1e-5 tail (Wilson-Hilferty): a correct sampler fails this
  // once in 100,000 seeds; a test at a fixed seed either always passes or
  // always fails.
  double critical() const {
    const double z = 4.265, k = df;
    const double c = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
    return k * c * c * c;
  }
  bool passes() const { return df > 0 && stat < critical(); }
};

ChiSquare chi_square(const std::map<int64_t, int64_t>& counts, const std::map<int64_t, double>& probs, int64_t n) {
  ChiSquare r;
  double pooled_obs = 0, pooled_exp = 0;
  int cells = 0;
  for (const auto& [cell, c] : counts)
    if (!probs.count(cell) || probs.at(cell) <= 0) {
      r.stat = INFINITY;
      r.df = 1;
      return r;
    }
  for (const auto& [cell, p] : probs) {
    const double e = p * double(n);
    const double o = counts.count(cell) ? double(counts.at(cell)) : 0.0;
    if (e >= 5) {
      r.stat += (o - e) * (o - e) / e;
      ++cells;
    } else {
      pooled_obs += o, pooled_exp += e;
    }
  }
  if (pooled_exp > 0) {
    r.stat += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / std::max(pooled_exp, 1e-9);
    ++cells;
  }
  r.df = cells - 1;
  return r;
}

std::string describe(const ChiSquare& c) {
  return "chi-square " + std::to_string(c.stat) + " on " + std::to_string(c.df) + " df (critical " +
         std::to_string(c.critical()) + ")";
}

using Rule = std::function<int32_t(std::span<const float> p, int32_t draft, std::span<const float> q, Sampler& s,
                                   std::vector<float>& scratch)>;

// Two positions whose target distributions p1, p2 do not depend on the
// tokens before them: a drafted pair (x1 ~ q1, x2 ~ q2) is verified as the
// Generator does (x2 only after x1 is accepted; otherwise the next
// position's token comes from p2 itself). The pair must follow p1 x p2.
ChiSquare two_positions(const std::vector<float>& p1, const std::vector<float>& p2, const std::vector<float>& q1,
                        const std::vector<float>& q2, const Rule& rule, int64_t n) {
  SamplingParams sp;
  sp.seed = 11;
  Sampler target(sp);
  sp.seed = 12;
  Sampler draft(sp);
  std::vector<float> scratch;
  std::map<int64_t, int64_t> counts;
  const int64_t V = int64_t(std::max(p1.size(), q1.size()));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t x1 = draft.draw(q1);
    const int32_t a = rule(p1, x1, q1, target, scratch);
    int32_t b;
    if (a == x1) {
      const int32_t x2 = draft.draw(q2);
      b = rule(p2, x2, q2, target, scratch);
    } else {
      b = target.draw(p2);
    }
    ++counts[a * V + b];
  }
  std::map<int64_t, double> probs;
  for (size_t i = 0; i < p1.size(); ++i)
    for (size_t j = 0; j < p2.size(); ++j)
      if (p1[i] * p2[j] > 0) probs[int64_t(i) * V + int64_t(j)] = double(p1[i]) * double(p2[j]);
  return chi_square(counts, probs, n);
}

struct Pair {
  const char* what;
  std::vector<float> p1, p2, q1, q2;
};

std::vector<Pair> stress_cases() {
  return {
      {"q close to p", {0.5f, 0.3f, 0.1f, 0.1f}, {0.25f, 0.25f, 0.25f, 0.25f},
       {0.45f, 0.35f, 0.1f, 0.1f}, {0.3f, 0.2f, 0.3f, 0.2f}},
      {"q peaked where p is small", {0.6f, 0.3f, 0.05f, 0.05f}, {0.1f, 0.2f, 0.3f, 0.4f},
       {0.02f, 0.03f, 0.05f, 0.9f}, {0.9f, 0.05f, 0.03f, 0.02f}},
      {"disjoint supports", {0.5f, 0.5f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.7f, 0.3f},
       {0.0f, 0.0f, 0.5f, 0.5f}, {0.6f, 0.4f, 0.0f, 0.0f}},
      // A draft vocabulary padded past the target's, and a shorter one.
      {"q over more tokens", {0.4f, 0.4f, 0.2f}, {0.2f, 0.3f, 0.5f},
       {0.3f, 0.3f, 0.1f, 0.2f, 0.1f}, {0.1f, 0.1f, 0.5f, 0.2f, 0.1f}},
      {"q over fewer tokens", {0.1f, 0.2f, 0.3f, 0.4f}, {0.4f, 0.3f, 0.2f, 0.1f},
       {0.5f, 0.5f}, {0.2f, 0.8f}},
  };
}

TEST(SpeculativeSampling, AcceptanceRuleKeepsTheTargetDistribution) {
  for (const Pair& c : stress_cases()) {
    const ChiSquare r = two_positions(c.p1, c.p2, c.q1, c.q2, accept_or_resample, 200000);
    EXPECT_TRUE(r.passes()) << c.what << ": " << describe(r);
  }
}

// The bound has the power to see a wrong rule: three plausible mistakes
// each fail it on the cases where q differs from p.
TEST(SpeculativeSampling, WrongAcceptanceRulesFailTheSameTest) {
  const std::vector<std::pair<const char*, Rule>> wrong = {
      {"resample from p instead of the residual",
       [](std::span<const float> p, int32_t x, std::span<const float> q, Sampler& s, std::vector<float>&) {
         const double px = size_t(x) < p.size() ? p[size_t(x)] : 0.0;
         return s.uniform() * q[size_t(x)] < px ? x : s.draw(p);
       }},
      {"accept with min(1, q / p)",
       [](std::span<const float> p, int32_t x, std::span<const float> q, Sampler& s, std::vector<float>& scratch) {
         const double px = size_t(x) < p.size() ? p[size_t(x)] : 0.0;
         if (s.uniform() * px < q[size_t(x)] && px > 0) return x;
         scratch.resize(p.size());
         for (size_t i = 0; i < p.size(); ++i) scratch[i] = std::max(0.0f, p[i] - (i < q.size() ? q[i] : 0.0f));
         const int32_t id = s.draw(scratch);
         return id >= 0 ? id : s.draw(p);
       }},
      {"always accept the draft",
       [](std::span<const float>, int32_t x, std::span<const float>, Sampler&, std::vector<float>&) { return x; }},
  };
  const Pair c = stress_cases()[1];
  for (const auto& [what, rule] : wrong) {
    const ChiSquare r = two_positions(c.p1, c.p2, c.q1, c.q2, rule, 200000);
    EXPECT_FALSE(r.passes()) << what << ": " << describe(r);
  }
}

TEST(SpeculativeSampling, GreedyDistributionsAreOneHot) {
  SamplingParams sp;
  sp.temperature = 0;
  Sampler s(sp);
  std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f}, p;
  s.distribution(logits.data(), 4, {}, p);
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
  // A draft that is not the argmax is never accepted, and the residual is
  // the argmax.
  std::vector<float> scratch;
  EXPECT_EQ(accept_or_resample(p, 2, std::vector<float>{0, 0, 1, 0}, s, scratch), 1);
  EXPECT_EQ(accept_or_resample(p, 1, std::vector<float>{0, 1, 0, 0}, s, scratch), 1);
}

// Sampler::distribution is the distribution sample() draws from, for every
// combination of its settings.
TEST(SpeculativeSampling, DistributionIsWhatTheSamplerDraws) {
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(40);
  for (float& l : logits) l = nd(g);
  const std::vector<int32_t> history = {3, 3, 7, 12, 39};
  struct Setting {
    float temperature;
    int32_t top_k;
    float top_p, penalty;
  };
  for (const Setting& st : {Setting{1.0f, 0, 1.0f, 1.0f}, Setting{0.7f, 0, 0.8f, 1.0f}, Setting{1.3f, 5, 1.0f, 1.0f},
                            Setting{0.9f, 10, 0.6f, 1.3f}, Setting{2.0f, 0, 0.95f, 1.5f}}) {
    SCOPED_TRACE("T " + std::to_string(st.temperature) + " top-k " + std::to_string(st.top_k) + " top-p " +
                 std::to_string(st.top_p) + " penalty " + std::to_string(st.penalty));
    SamplingParams sp;
    sp.temperature = st.temperature;
    sp.top_k = st.top_k;
    sp.top_p = st.top_p;
    sp.repetition_penalty = st.penalty;
    sp.seed = 21;
    Sampler s(sp);
    std::vector<float> work = logits, p;
    s.distribution(work.data(), int64_t(work.size()), history, p);
    double sum = 0;
    for (float v : p) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    std::map<int64_t, double> probs;
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] > 0) probs[int64_t(i)] = p[i];
    if (st.top_k > 0) {
      EXPECT_LE(probs.size(), size_t(st.top_k));
    }
    std::map<int64_t, int64_t> counts;
    const int64_t n = 100000;
    for (int64_t t = 0; t < n; ++t) {
      work = logits;
      ++counts[s.sample(work.data(), int64_t(work.size()), history)];
    }
    const ChiSquare r = chi_square(counts, probs, n);
    EXPECT_TRUE(r.passes()) << describe(r);
  }
}

// A Generator with a sampled draft model, for stories260K: drafted by its
// own int4 copy (group 32: mostly accepted) and by the golden random LLaMA
// of the same tokenizer (mostly rejected), at a temperature that spreads the
// top 8 tokens. The first token comes from the prompt's logits, the second
// through the acceptance rule: the pair must follow the target's
// p(t1) p(t2 | t1), computed by forwarding the target itself.
TEST(SpeculativeSampling, DraftModelOutputFollowsTheTarget) {
  ThreadPool pool(1);
  const std::string dir = test::testdata("stories260K/hf").string();
  LoadedModel target = load_model(dir, LoadOptions{}, pool);
  KVCacheOptions ko;
  ko.n_blocks = 8;
  ko.dtype = target.dtype;
  ModelRunner runner(*target.model, ko, pool);
  Generator gen(runner);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // "Once upon a time"
  GenerateOptions go;
  go.max_new_tokens = 3;
  go.speculative.num_tokens = 2;
  go.sampling.temperature = 1.5f;
  go.sampling.top_k = 8;
  const int64_t V = target.config.vocab_size, n = 6000;

  // The exact distribution of the pair, from the target's own logits.
  std::vector<float> rows, ignored, p1, p2;
  Sampler s(go.sampling);
  gen.score(prompt, {}, rows, ignored);
  std::vector<float> last(rows.end() - V, rows.end());
  s.distribution(last.data(), V, prompt, p1);
  std::map<int64_t, double> probs;
  for (int64_t a = 0; a < V; ++a) {
    if (p1[size_t(a)] <= 0) continue;
    std::vector<int32_t> ctx = prompt;
    ctx.push_back(int32_t(a));
    gen.score(ctx, {}, rows, ignored);
    std::vector<float> row(rows.end() - V, rows.end());
    s.distribution(row.data(), V, ctx, p2);
    for (int64_t b = 0; b < V; ++b)
      if (p2[size_t(b)] > 0) probs[a * V + b] = double(p1[size_t(a)]) * double(p2[size_t(b)]);
  }
  ASSERT_GE(probs.size(), 40u);

  struct Draft {
    const char* what;
    std::string dir;
    LoadOptions lo;
    double min_acceptance, max_acceptance;
  };
  LoadOptions q4;
  q4.quant = QuantType::Q4;
  q4.group_size = 32;
  for (const Draft& d : {Draft{"int4 copy", dir, q4, 0.4, 0.98},
                         Draft{"random llama", test::testdata("golden/llama/hf").string(), LoadOptions{}, 0.0, 0.3}}) {
    SCOPED_TRACE(d.what);
    LoadedModel draft = load_model(d.dir, d.lo, pool);
    KVCacheOptions dko = ko;
    dko.dtype = draft.dtype;
    ModelRunner draft_runner(*draft.model, dko, pool);
    DraftModel dm(draft_runner);
    go.speculative.draft = &dm;
    std::map<int64_t, int64_t> counts;
    int64_t drafted = 0, accepted = 0;
    for (int64_t seed = 0; seed < n; ++seed) {
      go.sampling.seed = uint64_t(seed);
      const GenerateResult r = gen.generate(prompt, go);
      ASSERT_EQ(r.output_ids.size(), 3u);
      ++counts[int64_t(r.output_ids[0]) * V + r.output_ids[1]];
      drafted += r.n_drafted, accepted += r.n_accepted;
    }
    ASSERT_GT(drafted, 0);
    const double acceptance = double(accepted) / double(drafted);
    EXPECT_GE(acceptance, d.min_acceptance);
    EXPECT_LE(acceptance, d.max_acceptance);
    const ChiSquare r = chi_square(counts, probs, n);
    EXPECT_TRUE(r.passes()) << describe(r) << ", acceptance " << acceptance;
    EXPECT_GE(r.df, 15);
  }
}

}  // namespace
}  // namespace rinfer

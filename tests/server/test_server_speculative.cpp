// serve --speculative ngram: continuous batching with drafts verified in the
// same step. Greedy and seeded sampling, with logprobs, must give what the
// engine gives without speculation, token for token, for concurrent
// requests, under preemption with a tiny pool and with prefix caching (an
// accepted draft's block may be registered; a rejected one's never); the
// drafts must actually be accepted, and the back-off must stop drafting in
// a large batch.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "server_test_util.h"

namespace rinfer::test {
namespace {

struct Output {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  bool operator==(const Output&) const = default;
};

// Stories that repeat their phrases, so that prompt lookup finds drafts.
std::vector<std::string> stories(int n) {
  const char* base[] = {
      "Once upon a time, there was a little girl named Lily. She loved to play outside. Once upon a time, there was",
      "The cat sat on the mat. The cat was happy. The dog came to the cat. The cat sat on the",
      "Tom had a red ball. Tom liked to play with the red ball in the park. One day Tom took the red",
      "Mom said, \"Let's go to the park.\" Lily said, \"Yes, let's go to the park!\" They went to the"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(std::string(base[i % 4]) + std::string(size_t(i / 4), ' '));
  return out;
}

// Submits every prompt at once and waits for all of them.
std::vector<Output> generate_all(Engine& engine, const Tokenizer& tok, const std::vector<std::string>& prompts,
                                 const SamplingParams& sampling, int64_t max_new, int top_logprobs = -1) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Output> out(prompts.size());
  size_t done = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest req;
    req.prompt = tok.encode(prompts[i], /*add_special=*/true);
    req.max_new_tokens = max_new;
    req.sampling = sampling;
    req.sampling.seed = sampling.seed + i;
    req.top_logprobs = top_logprobs;
    engine.submit(std::move(req), [&, i](const GenerationEvent& ev) {
      std::lock_guard<std::mutex> lk(mu);
      if (ev.token >= 0) {
        out[i].ids.push_back(ev.token);
        if (top_logprobs >= 0) out[i].logprobs.push_back(ev.logprob);
      }
      if (ev.finished) {
        EXPECT_NE(ev.finish_reason, FinishReason::Error) << ev.error;
        ++done;
        cv.notify_all();
      }
    });
  }
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return done == prompts.size(); });
  return out;
}

TestServerOptions speculative(int64_t k, TestServerOptions o = {}) {
  o.engine.scheduler.speculative.num_tokens = k;
  return o;
}

std::vector<SamplingParams> samplings() {
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.top_p = 0.95f;
  sampled.seed = 100;
  SamplingParams penalized;
  penalized.temperature = 1.0f;
  penalized.top_k = 40;
  penalized.repetition_penalty = 1.2f;
  penalized.seed = 200;
  return {greedy, sampled, penalized};
}

TEST(ServerSpeculative, ConcurrentOutputsAndLogprobsAreThoseWithoutIt) {
  const auto ps = stories(8);
  for (const SamplingParams& sp : samplings()) {
    SCOPED_TRACE("temperature " + std::to_string(sp.temperature));
    std::vector<Output> plain;
    {
      TestServer s;
      plain = generate_all(s.engine(), s.tokenizer(), ps, sp, 64, 2);
    }
    for (int64_t k : {1, 3, 6}) {
      SCOPED_TRACE("k = " + std::to_string(k));
      TestServer s(speculative(k));
      const auto spec = generate_all(s.engine(), s.tokenizer(), ps, sp, 64, 2);
      for (size_t i = 0; i < ps.size(); ++i) {
        EXPECT_EQ(spec[i].ids, plain[i].ids) << "prompt " << i;
        // A step's batch has more rows with drafts, which may take another
        // matmul path: the logprobs agree to rounding.
        ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size());
        for (size_t t = 0; t < spec[i].logprobs.size(); ++t)
          ASSERT_NEAR(spec[i].logprobs[t], plain[i].logprobs[t], 1e-3f) << "prompt " << i << " token " << t;
      }
      const double drafted = s.metric("rinfer_spec_decode_draft_tokens_total");
      const double accepted = s.metric("rinfer_spec_decode_accepted_tokens_total");
      EXPECT_GT(drafted, 0);
      EXPECT_GT(accepted, 0);
      EXPECT_LE(accepted, drafted);
      EXPECT_EQ(s.blocks_used_when_idle(), 0);
    }
  }
}

TEST(ServerSpeculative, PreemptionAndPrefixCachingKeepOutputs) {
  const auto ps = stories(12);
  SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<Output> plain;
  {
    TestServer s;
    plain = generate_all(s.engine(), s.tokenizer(), ps, greedy, 80);
  }
  TestServerOptions o;
  o.kv_tokens = 16 * 14;  // about three of these sequences at once
  o.engine.scheduler.policy = SchedulerPolicy::Preemption;
  TestServer s(speculative(4, o));
  // Twice: the second round finds the first one's blocks in the prefix
  // cache, accepted drafts' included.
  for (int round = 0; round < 2; ++round) {
    const auto spec = generate_all(s.engine(), s.tokenizer(), ps, greedy, 80);
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(spec[i].ids, plain[i].ids) << "round " << round << " prompt " << i;
  }
  EXPECT_GT(s.metric("rinfer_preemptions_total"), 0) << "the pool was meant to be too small";
  EXPECT_GT(s.metric("rinfer_spec_decode_accepted_tokens_total"), 0);
  EXPECT_GT(s.metric("rinfer_prefix_cache_hits_total"), 0);
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

TEST(ServerSpeculative, NoDraftsInALargeBatch) {
  const auto ps = stories(8);
  SamplingParams greedy;
  greedy.temperature = 0;
  TestServerOptions o;
  o.engine.scheduler.speculative.max_batch = 1;
  TestServer s(speculative(3, o));
  // Eight at once: drafting resumes only when one sequence is left running.
  const auto together = generate_all(s.engine(), s.tokenizer(), ps, greedy, 32);
  const double batch_drafts = s.metric("rinfer_spec_decode_draft_tokens_total");
  // One alone drafts from its first decode step.
  generate_all(s.engine(), s.tokenizer(), {ps[0]}, greedy, 32);
  const double alone_drafts = s.metric("rinfer_spec_decode_draft_tokens_total") - batch_drafts;
  EXPECT_GT(alone_drafts, 0);
  EXPECT_LT(batch_drafts, 8 * alone_drafts / 2) << "drafts were made while eight sequences ran";
}

// bench-serve against a speculative server: every request completes, and
// each run reports the engine steps and the drafts the server counted
// during it (from /metrics).
TEST(ServerSpeculative, BenchServeReportsAcceptance) {
  TestServer s(speculative(3));
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("bench_serve_" + std::to_string(getpid()) + ".json");
  const CmdResult r = run_rinfer("bench-serve --url " + s.url() +
                                 " --concurrency 1,4 --num-prompts 8 --input-len 24 --output-len 24 --json " +
                                 quote(out.string()));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("speculative:"), std::string::npos) << r.out;
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  ASSERT_EQ(j.at("runs").size(), 2u);
  for (const auto& run : j.at("runs")) {
    EXPECT_EQ(run.at("completed"), 8);
    EXPECT_EQ(run.at("failed"), 0);
    // 8 x 24 tokens, one per sequence per step at most without drafts: the
    // accepted drafts are the steps saved.
    const double steps = run.at("server").at("engine_steps");
    const double accepted = run.at("speculative").at("accepted");
    EXPECT_GT(run.at("speculative").at("drafted").get<double>(), 0);
    EXPECT_GT(run.at("server").at("tokens_per_step").get<double>(), 0);
    if (run.at("concurrency") == 1) {
      EXPECT_EQ(steps + accepted, 8 * 24);
    }
  }
}

}  // namespace
}  // namespace rinfer::test

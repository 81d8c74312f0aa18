// Continuous batching through the HTTP server: batch invariance,
// preemption, cancellation on disconnect, prefix caching, bounded load.
#include <gtest/gtest.h>

#include <atomic>

#include "server_test_util.h"

#include "core/process_stats.h"

namespace rinfer::test {
namespace {

using json = nlohmann::json;

std::vector<std::string> prompts(int n) {
  const char* starts[] = {"Once upon a time", "The little cat", "One day, a boy named Tim", "Lily wanted to",
                          "The sun was", "There was a big red ball", "Mom said", "The dog and the bird"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(std::string(starts[i % 8]) + std::string(size_t(i / 8), '!'));
  return out;
}

// Greedy ids of every prompt sent at once from its own client.
std::vector<std::vector<int32_t>> concurrent_greedy(const TestServer& s, const std::vector<std::string>& ps,
                                                    int max_tokens) {
  std::vector<std::vector<int32_t>> out(ps.size());
  std::vector<std::thread> ts;
  for (size_t i = 0; i < ps.size(); ++i) ts.emplace_back([&, i] { out[i] = greedy_ids(s, ps[i], max_tokens); });
  for (auto& t : ts) t.join();
  return out;
}

TEST(ServerBatching, ConcurrentGreedyRequestsEqualEachAlone) {
  const auto ps = prompts(32);
  std::vector<std::vector<int32_t>> alone;
  {
    TestServerOptions o;
    o.engine.prefix_caching = false;
    TestServer s(o);
    for (const auto& p : ps) alone.push_back(greedy_ids(s, p, 48));
  }
  TestServer s;
  auto together = concurrent_greedy(s, ps, 48);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "prompt " << i << ": " << ps[i];
  EXPECT_GT(s.metric("rinfer_engine_steps_total"), 0);
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

TEST(ServerBatching, PromptChunksMixedWithDecodesKeepOutputs) {
  // A budget of 8 tokens per step splits every prompt into chunks, and steps
  // mix decode tokens with prompt chunks; only the chunks that reach their
  // prompt's end get a row of logits (LogitRows::None for the others: no
  // output-layer work for them). The outputs must not change.
  const auto ps = prompts(8);
  std::vector<std::vector<int32_t>> alone;
  {
    TestServer s;
    for (const auto& p : ps) alone.push_back(greedy_ids(s, p + " and then the long day went on", 24));
  }
  TestServerOptions o;
  o.engine.scheduler.max_num_seqs = 4;
  o.engine.scheduler.max_batch_tokens = 8;
  TestServer s(o);
  std::vector<std::string> long_ps;
  for (const auto& p : ps) long_ps.push_back(p + " and then the long day went on");
  auto together = concurrent_greedy(s, long_ps, 24);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "prompt " << i << ": " << long_ps[i];
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

TEST(ServerBatching, PreemptionWithATinyPoolKeepsOutputs) {
  const auto ps = prompts(16);
  std::vector<std::vector<int32_t>> alone;
  {
    TestServer s;
    for (const auto& p : ps) alone.push_back(greedy_ids(s, p, 64));
  }
  TestServerOptions o;
  o.kv_tokens = 16 * 12;  // 12 blocks: room for about three of these sequences at once
  o.engine.scheduler.policy = SchedulerPolicy::Preemption;
  o.engine.prefix_caching = false;  // so resuming recomputes everything
  TestServer s(o);
  auto together = concurrent_greedy(s, ps, 64);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "prompt " << i;
  EXPECT_GT(s.metric("rinfer_preemptions_total"), 0) << "the pool was meant to be too small";
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

TEST(ServerBatching, FifoWithATinyPoolQueuesInsteadOfPreempting) {
  const auto ps = prompts(8);
  TestServerOptions o;
  o.kv_tokens = 16 * 12;
  TestServer s(o);
  auto out = concurrent_greedy(s, ps, 64);
  for (const auto& ids : out) EXPECT_FALSE(ids.empty());
  EXPECT_EQ(s.metric("rinfer_preemptions_total"), 0);
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

TEST(ServerBatching, DisconnectedStreamsFreeTheirBlocks) {
  TestServer s;
  std::vector<std::thread> ts;
  std::atomic<int> got_tokens{0};
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      // Read a few events of a long stream, then hang up.
      httplib::Client c("127.0.0.1", s.port());
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = json{{"model", "m"}, {"prompt", prompts(8)[size_t(i)]}, {"max_tokens", 400}, {"ignore_eos", true},
                      {"stream", true}}
                     .dump();
      req.set_header("Content-Type", "application/json");
      int events = 0;
      req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
        ++got_tokens;
        return ++events < 5;  // false: the client closes the connection
      };
      c.send(req);
    });
  for (auto& t : ts) t.join();
  EXPECT_GE(got_tokens.load(), 8);
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
  // Cancelled, not run to the end: 8 x 400 tokens were asked for.
  EXPECT_LT(s.metric("rinfer_generation_tokens_total"), 8 * 400);
}

TEST(ServerBatching, RepeatedPrefixIsServedFromTheCache) {
  TestServer s;
  std::string system = "Once upon a time, there was a little girl named Lily. She loved to play outside. ";
  for (int i = 0; i < 3; ++i) system += system.substr(0, 80);
  auto a = greedy_ids(s, system + "One day", 8);
  const double hits_before = s.metric("rinfer_prefix_cache_hits_total");
  auto b = greedy_ids(s, system + "The dog", 8);
  const double hits = s.metric("rinfer_prefix_cache_hits_total") - hits_before;
  EXPECT_GE(hits, 64) << "the shared prefix was prefilled again";
  EXPECT_GT(s.metric("rinfer_kv_cache_blocks_cached"), 0);
  EXPECT_FALSE(a.empty());
  EXPECT_FALSE(b.empty());
}

TEST(ServerBatching, SixtyFourClientsTwentyRequestsEach) {
  TestServer s;
  // Two identical rounds: the first warms everything up (server threads,
  // activation buffers, allocator arenas); the second must not grow RSS, so a
  // per-request leak of even ~12 KB would show (1280 requests per round).
  uint64_t rss_after_first = 0;
  for (int round = 0; round < 2; ++round) {
    std::atomic<int> failed{0}, done{0};
    std::vector<std::thread> ts;
    for (int c = 0; c < 64; ++c)
      ts.emplace_back([&, c] {
        httplib::Client cli("127.0.0.1", s.port());
        cli.set_keep_alive(true);
        cli.set_read_timeout(60, 0);
        for (int i = 0; i < 20; ++i) {
          json body = {{"model", "m"}, {"prompt", prompts(64)[size_t(c)]}, {"max_tokens", 8 + (c + i) % 8},
                       {"temperature", 0.7}, {"seed", c * 100 + i}, {"stream", (c + i) % 2 == 0}};
          auto r = cli.Post("/v1/completions", body.dump(), "application/json");
          if (!r || r->status != 200 || r->body.find("\"error\"") != std::string::npos)
            ++failed;
          else
            ++done;
        }
      });
    for (auto& t : ts) t.join();
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(done.load(), 64 * 20);
    EXPECT_EQ(s.blocks_used_when_idle(), 0);
    EXPECT_EQ(s.metric("rinfer_requests_running"), 0);
    if (round == 0) rss_after_first = current_rss_bytes();
  }
  const uint64_t rss_after_second = current_rss_bytes();
  uint64_t allowed = uint64_t(16) << 20;
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed memory in its quarantine (256 MiB by
  // default) instead of reusing it, which shows as RSS growth.
  allowed += uint64_t(256 + 64) << 20;
#endif
  EXPECT_LE(rss_after_second, rss_after_first + allowed)
      << "RSS grew from " << rss_after_first << " to " << rss_after_second << " bytes over 1280 more requests";
}

}  // namespace
}  // namespace rinfer::test

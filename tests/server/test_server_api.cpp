// The OpenAI-compatible API of `rinfer serve`: answers, errors, auth, limits.
#include <gtest/gtest.h>

#include <atomic>

#include "server_test_util.h"

namespace rinfer::test {
namespace {

using json = nlohmann::json;

// SSE "data: " payloads of a streamed response, [DONE] included.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0, end;
  while ((end = body.find("\n\n", pos)) != std::string::npos) {
    std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) == 0) out.push_back(ev.substr(6));
  }
  return out;
}

TEST(ServerApi, GreedyCompletionMatchesRinferRun) {
  TestServer s;
  const std::string prompt = "Once upon a time, there was a little dog";
  auto run = run_rinfer("run --model " + quote(stories_dir()) + " --prompt " + quote(prompt) +
                        " --max-new-tokens 40 --temperature 0 --json");
  ASSERT_EQ(run.code, 0) << run.err;
  auto expected = json::parse(run.out)["output_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(greedy_ids(s, prompt, 40), expected);
  // The same again: now its prompt blocks come from the prefix cache.
  EXPECT_EQ(greedy_ids(s, prompt, 40), expected);
}

TEST(ServerApi, CompletionResponseShape) {
  TestServer s;
  auto r = s.post("/v1/completions", {{"model", "m"}, {"prompt", "Once upon a time"}, {"max_tokens", 8},
                                      {"temperature", 0}, {"logprobs", 2}, {"n", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "stories260K");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], j["choices"][1]["text"]) << "greedy choices differ";
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"].size(), 8u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
  EXPECT_LE(j["choices"][0]["logprobs"]["token_logprobs"][0].get<double>(), 0.0);
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 16);
}

TEST(ServerApi, SeededSamplingIsReproducible) {
  TestServer s;
  json body = {{"model", "m"}, {"prompt", "Once"}, {"max_tokens", 24}, {"temperature", 0.9}, {"top_p", 0.9},
               {"top_k", 40}, {"seed", 7}};
  auto a = s.post("/v1/completions", body), b = s.post("/v1/completions", body);
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(parse(a.body)["choices"][0]["text"], parse(b.body)["choices"][0]["text"]);
}

TEST(ServerApi, StopStringsCutTheText) {
  TestServer s;
  auto full = s.post("/v1/completions", {{"model", "m"}, {"prompt", "Once upon a time"}, {"max_tokens", 30},
                                         {"temperature", 0}});
  const std::string text = parse(full.body)["choices"][0]["text"];
  ASSERT_NE(text.find("Lily"), std::string::npos) << text;
  for (bool stream : {false, true}) {
    auto r = s.post("/v1/completions", {{"model", "m"}, {"prompt", "Once upon a time"}, {"max_tokens", 30},
                                        {"temperature", 0}, {"stop", {"Lily", "zzz"}}, {"stream", stream}});
    ASSERT_EQ(r.status, 200);
    std::string got, finish;
    if (stream) {
      for (const auto& ev : sse_events(r.body)) {
        if (ev == "[DONE]") continue;
        auto c = parse(ev)["choices"][0];
        got += c["text"].get<std::string>();
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      }
    } else {
      got = parse(r.body)["choices"][0]["text"];
      finish = parse(r.body)["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(got, text.substr(0, text.find("Lily"))) << "stream=" << stream;
    EXPECT_EQ(finish, "stop");
  }
}

TEST(ServerApi, ChatStreamsRoleThenContentThenUsage) {
  TestServer s;
  auto r = s.post("/v1/chat/completions", {{"model", "m"},
                                           {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                           {"max_tokens", 6},
                                           {"temperature", 0},
                                           {"stream", true},
                                           {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  auto evs = sse_events(r.body);
  ASSERT_GE(evs.size(), 3u);
  EXPECT_EQ(evs.back(), "[DONE]");
  EXPECT_EQ(parse(evs[0])["choices"][0]["delta"]["role"], "assistant");
  auto usage = parse(evs[evs.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  auto last = parse(evs[evs.size() - 3]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
}

TEST(ServerApi, BadRequestsAre400WithAnErrorObject) {
  TestServer s;
  auto c = s.client();
  auto expect_400 = [&](const std::string& body, const std::string& param, const std::string& path) {
    auto r = c.Post(path.c_str(), body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
    auto j = parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
  };
  const std::string comp = "/v1/completions", chat = "/v1/chat/completions";
  expect_400("{not json", "", comp);
  expect_400("[1, 2]", "", comp);
  expect_400(R"({"model":"m","prompt":"x","max_tokens":"8"})", "max_tokens", comp);
  expect_400(R"({"model":"m","prompt":"x","temperature":-1})", "temperature", comp);
  expect_400(R"({"model":"m","prompt":"x","max_tokens":0})", "max_tokens", comp);
  expect_400(R"({"model":"m","prompt":"x","max_tokens":100000})", "max_tokens", comp);
  expect_400(R"({"model":"m","prompt":"x","frobnicate":true})", "frobnicate", comp);
  expect_400(R"({"model":"m","prompt":"x","presence_penalty":0.5})", "presence_penalty", comp);
  expect_400(R"({"prompt":"x"})", "model", comp);
  expect_400(R"({"model":"m","prompt":[1, 99999]})", "prompt", comp);
  expect_400(R"({"model":"m","messages":[]})", "messages", chat);
  expect_400(R"({"model":"m","messages":[{"role":"robot","content":"x"}]})", "messages[0].role", chat);
  expect_400(R"({"model":"m","messages":[{"role":"user","content":"x","extra":1}]})", "messages[0].extra", chat);
  // Fields of the wrong JSON type inside objects (found by fuzzing: they
  // escaped as a 500).
  expect_400(R"({"model":"m","messages":[{"role":"user","content":[{"type":[],"text":"x"}]}]})",
             "messages[0].content", chat);
  expect_400(R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":7}]}]})",
             "messages[0].content", chat);
  expect_400(R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":{}}})",
             "response_format", chat);
  // Deep nesting anywhere in the body (a tool list, a field taken at its
  // no-op value, the prompt, stop) is refused before any tree is built; the
  // server then still answers.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const auto& [body, path] :
       {std::pair{R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":)" + deep + "}", chat},
        {R"({"model":"m","messages":[{"role":"user","content":"hi"}],"user":)" + deep + "}", chat},
        {R"({"model":"m","prompt":)" + deep + "}", comp},
        {R"({"model":"m","prompt":"x","stop":)" + deep + "}", comp},
        {std::string(200, '{'), comp}}) {
    auto r = c.Post(path.c_str(), body, "application/json");
    ASSERT_TRUE(r) << "the server died on " << body.substr(0, 80);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("nests deeper than 128 levels"), std::string::npos) << r->body;
  }
  // Nesting within the budget is an ordinary bad value.
  expect_400(R"({"model":"m","prompt":"x","stop":)" + std::string(100, '[') + std::string(100, ']') + "}", "stop",
             comp);
  // A prompt that fills the whole context.
  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += "time ";
  expect_400(json{{"model", "m"}, {"prompt", long_prompt}}.dump(), "prompt", comp);
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

TEST(ServerApi, LimitsAndUnknownPaths) {
  TestServerOptions o;
  o.http.max_body_bytes = 2048;
  TestServer s(o);
  auto c = s.client();
  auto r = c.Post("/v1/completions", json{{"model", "m"}, {"prompt", std::string(4096, 'a')}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(parse(r->body).contains("error")) << r->body;
  r = c.Get("/v1/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(parse(r->body).contains("error"));
  r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  auto m = parse(r->body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "stories260K");
}

TEST(ServerApi, ApiKeyIsRequiredOnV1Only) {
  TestServerOptions o;
  o.http.api_key = "sekrit";
  TestServer s(o);
  json body = {{"model", "m"}, {"prompt", "Once"}, {"max_tokens", 2}};
  EXPECT_EQ(s.post("/v1/completions", body).status, 401);
  EXPECT_EQ(s.post("/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(s.post("/v1/completions", body, {{"Authorization", "Bearer sekrit"}}).status, 200);
  auto c = s.client();
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(ServerApi, FullQueueAnswers503WithRetryAfter) {
  TestServerOptions o;
  o.engine.scheduler.max_num_seqs = 1;
  o.engine.scheduler.max_batch_tokens = 64;
  o.engine.max_waiting = 1;
  TestServer s(o);
  // Fill the engine with slow-to-finish streams, then one more must bounce.
  std::vector<std::thread> clients;
  std::atomic<int> ok{0}, busy{0};
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      auto r = s.post("/v1/completions", {{"model", "m"}, {"prompt", "Once"}, {"max_tokens", 200},
                                          {"ignore_eos", true}});
      if (r.status == 200) ++ok;
      if (r.status == 503) {
        ++busy;
        EXPECT_EQ(r.get_header_value("Retry-After"), "1");
        EXPECT_TRUE(parse(r.body).contains("error"));
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_GE(ok.load(), 1);
  EXPECT_GE(busy.load(), 1);
  EXPECT_EQ(ok + busy, 8);
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

}  // namespace
}  // namespace rinfer::test

#pragma once
// An in-process `rinfer serve` on 127.0.0.1 (any free port) over the real
// stories260K model, plus small HTTP helpers for the server tests.
#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "runtime/engine.h"
#include "loading/model_loader.h"
#include "server/http_server.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace rinfer::test {

inline std::string stories_dir() { return testdata("stories260K/hf").string(); }

struct TestServerOptions {
  int64_t kv_tokens = 8192;
  EngineOptions engine;
  server::ServerOptions http;
};

class TestServer {
 public:
  explicit TestServer(TestServerOptions o = {}) {
    pool_ = std::make_unique<ThreadPool>(1);
    lm_ = load_model(stories_dir(), {}, *pool_);
    KVCacheOptions ko;
    ko.block_size = 16;
    ko.n_blocks = KVCache::blocks_for_tokens(o.kv_tokens, ko.block_size);
    ko.dtype = lm_.dtype;
    tokenizer_ = Tokenizer::load(stories_dir());
    runner_ = std::make_unique<ModelRunner>(*lm_.model, ko, *pool_);
    engine_ = std::make_unique<Engine>(*runner_, o.engine);
    o.http.port = 0;
    o.http.host = "127.0.0.1";
    o.http.model_name = "stories260K";
    std::vector<int32_t> eos = lm_.config.eos_token_ids;
    if (tokenizer_->eos_id() >= 0 && std::find(eos.begin(), eos.end(), tokenizer_->eos_id()) == eos.end())
      eos.push_back(tokenizer_->eos_id());
    http_opts_ = o.http;
    http_ = std::make_unique<server::HttpServer>(*engine_, *tokenizer_, eos, o.http);
    port_ = http_->bind();
    thread_ = std::thread([this] { http_->serve(); });
  }
  ~TestServer() {
    http_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  const server::ServerOptions& http_options() const { return http_opts_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  Engine& engine() { return *engine_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  // POST a JSON body; returns the response (status -1 when the request failed).
  httplib::Response post(const std::string& path, const nlohmann::json& body,
                         const httplib::Headers& headers = {}) const {
    auto c = client();
    auto r = c.Post(path.c_str(), headers, body.dump(), "application/json");
    if (!r) {
      httplib::Response bad;
      bad.status = -1;
      return bad;
    }
    return *r;
  }
  // Value of a metric line "name value" from /metrics (-1 if missing).
  double metric(const std::string& name) const {
    auto c = client();
    auto r = c.Get("/metrics");
    if (!r) return -1;
    const std::string& b = r->body;
    size_t pos = 0;
    while ((pos = b.find(name + " ", pos)) != std::string::npos) {
      if (pos == 0 || b[pos - 1] == '\n') return std::stod(b.substr(pos + name.size() + 1));
      pos += name.size();
    }
    return -1;
  }
  // Blocks referenced by sequences, once the engine has caught up (a
  // cancellation lands at the next step; bounded wait).
  double blocks_used_when_idle() const {
    double used = -1;
    for (int i = 0; i < 200; ++i) {
      used = metric("rinfer_kv_cache_blocks_used");
      if (used == 0 && metric("rinfer_requests_running") == 0 && metric("rinfer_requests_waiting") == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return used;
  }

 private:
  std::unique_ptr<ThreadPool> pool_;
  LoadedModel lm_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
  server::ServerOptions http_opts_;
  std::unique_ptr<server::HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

// Runs a shell command, returning its exit code and interleaved output.
inline int sh(const std::string& cmd, std::string& out) {
  out.clear();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Where the `openai` npm package is, installed into the build tree on first
// use (npm's cache makes later installs offline); "" and `why` on failure.
inline std::string openai_npm_dir(std::string& why) {
  std::string out;
  if (sh("node --version", out) != 0) {
    why = "Node.js is needed for this test: " + out;
    return "";
  }
  const std::filesystem::path dir = std::filesystem::path(RINFER_BIN).parent_path().parent_path() / "npm";
  if (!std::filesystem::exists(dir / "node_modules" / "openai" / "package.json") &&
      sh("timeout 180 npm install --prefix " + quote(dir.string()) +
             " openai --prefer-offline --no-audit --no-fund --loglevel=error",
         out) != 0) {
    why = "npm could not install the openai package into " + dir.string() +
          " (npm registry unreachable and nothing in npm's cache?):\n" + out;
    return "";
  }
  return dir.string();
}

inline nlohmann::json parse(const std::string& s) { return nlohmann::json::parse(s, nullptr, false); }

// Greedy completion of `prompt` with the server; returns its token ids.
inline std::vector<int32_t> greedy_ids(const TestServer& s, const std::string& prompt, int max_tokens) {
  auto r = s.post("/v1/completions", {{"model", "m"},
                                      {"prompt", prompt},
                                      {"max_tokens", max_tokens},
                                      {"temperature", 0},
                                      {"return_token_ids", true}});
  EXPECT_EQ(r.status, 200) << r.body;
  auto j = parse(r.body);
  if (j.is_discarded() || !j.contains("choices")) return {};
  return j["choices"][0]["token_ids"].get<std::vector<int32_t>>();
}

}  // namespace rinfer::test

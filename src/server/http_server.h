#pragma once
// HttpServer: the OpenAI-compatible HTTP front of the engine (cpp-httplib).
//   POST /v1/completions, /v1/chat/completions   (JSON or SSE streams)
//   GET  /v1/models, /health, /metrics
// Every error is OpenAI's error object. With an API key, /v1/* needs
// "Authorization: Bearer KEY"; /health and /metrics stay open (probes and
// scrapers). One HTTP thread serves one connection (requests pipelined on
// it are answered in order); a streaming or waiting request holds its
// thread. Connections are capped in all and per client address (503
// beyond), and a request must arrive whole within request_timeout of its
// first byte, so slow or numerous clients cannot take every thread.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/metrics.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace rinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0: any free port (bind() says which)
  std::string api_key;               // empty: no authentication
  std::string model_name = "rinfer"; // what /v1/models lists and responses name
  size_t max_body_bytes = 1 << 20;   // larger requests get 413
  int64_t max_tokens_limit = 0;      // per request; 0: max_model_len
  int max_n = 16;                    // choices per request at most
  size_t max_connections = 1024;     // held at once, each with its thread
  size_t max_connections_per_client = 256;  // from one client address
  double request_timeout_s = 30;     // headers + body, from the first byte
  double idle_timeout_s = 5;         // keep-alive: wait for a next request
  // The model's chat template for /v1/chat/completions; null: the plain
  // fallback format of chat_prompt.h. Owned by the caller.
  const ChatTemplate* chat_template = nullptr;
};

class HttpServer {
 public:
  HttpServer(Engine& engine, const Tokenizer& tokenizer, std::vector<int32_t> eos_ids, ServerOptions opts);
  ~HttpServer();

  // Binds the listening socket; returns the port. Throws rinfer::Error.
  int bind();
  // Serves until stop(); call after bind().
  void serve();
  // Stops accepting, ends the streams in flight (their requests are
  // cancelled) and makes serve() return. Any thread; idempotent.
  void stop();
  Metrics& metrics() { return metrics_; }

 private:
  class Listener;
  void routes();
  void completion(const std::string& body, bool chat, void* res);

  Engine& engine_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_ids_;
  ServerOptions opts_;
  Metrics metrics_;
  std::unique_ptr<Listener> http_;
  std::atomic<bool> stopping_{false};
  int64_t started_ = 0;  // unix time, for /v1/models
};

}  // namespace rinfer::server

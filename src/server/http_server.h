#pragma once
// HttpServer: the OpenAI-compatible HTTP front of the engine (cpp-httplib).
//   POST /v1/completions, /v1/chat/completions   (JSON or SSE streams)
//   GET  /v1/models, /health, /metrics
// Every error is OpenAI's error object. With an API key, /v1/* needs
// "Authorization: Bearer KEY"; /health and /metrics stay open (probes and
// scrapers). One HTTP thread serves one connection; a streaming or waiting
// request holds its thread, so there are enough threads for every running
// and queued sequence.
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
  int http_threads = 0;              // 0: max_num_seqs + max_waiting + 8
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
  void routes();
  void completion(const std::string& body, bool chat, void* res);

  Engine& engine_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_ids_;
  ServerOptions opts_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
  int64_t started_ = 0;  // unix time, for /v1/models
};

}  // namespace rinfer::server

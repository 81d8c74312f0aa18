#pragma once
// CompletionSession: one OpenAI completion or chat request in flight. It
// tokenizes the prompt, submits one engine sequence per choice (n), and
// turns the engine's token events into OpenAI output: text released as
// whole UTF-8 and cut at stop strings, logprobs, finish reasons, usage,
// either as stream chunks (SSE) or one response object. Destroying it
// cancels whatever is still running, so a client that goes away frees its
// KV blocks at the next engine step.
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "server/event_queue.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/stop_matcher.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rinfer::server {

struct SessionContext {
  Engine& engine;
  const Tokenizer& tokenizer;
  Metrics& metrics;
  std::string model_name;
  std::vector<int32_t> eos_ids;   // what `rinfer run` stops at
  int64_t max_tokens_limit = 0;   // per request; 0: max_model_len
  const ChatTemplate* chat_template = nullptr;  // null: plain fallback format
};

class CompletionSession {
 public:
  // Tokenizes and checks lengths; throws ApiError (400).
  CompletionSession(const SessionContext& ctx, CompletionParams params);
  ~CompletionSession();

  // Submits the choices; throws ApiError (503 when the queue is full, 400
  // when the engine refuses the request).
  void start();
  // Handles the events that arrived, waiting up to `timeout` for the first.
  // Streaming: appends the SSE chunks (JSON objects) they produce. False
  // when nothing arrived.
  bool poll(std::chrono::milliseconds timeout, std::vector<nlohmann::json>* chunks);
  bool done() const;
  void cancel();
  // The client went away: cancels, then waits (bounded) for the engine's
  // last events so that the choices are counted in the metrics as what
  // they became (mostly "cancelled").
  void abandon();

  bool stream() const { return params_.stream; }
  bool include_usage() const { return params_.include_usage; }
  // After done(): the non-streaming response, or the usage chunk and the
  // error (if an engine failure ended a choice) for a stream.
  nlohmann::json response() const;
  nlohmann::json usage_chunk() const;
  const std::string& error() const { return error_; }

 private:
  struct Logprob {
    int32_t id;
    float logprob;
    std::vector<TokenLogprob> top;
  };
  struct Choice {
    int64_t engine_id = -1;
    std::unique_ptr<StreamingDetokenizer> detok;
    std::unique_ptr<StopMatcher> stop;
    std::string text;
    std::vector<int32_t> ids;
    std::vector<Logprob> logprobs;
    std::string finish_reason;  // set once no more text will come
    bool engine_done = false;   // the engine's last event arrived (blocks freed)
    bool role_sent = false;     // chat streams announce the role first
    bool finish_sent = false;   // streams: the chunk with finish_reason went out
  };
  void handle(const GenerationEvent& ev, std::vector<nlohmann::json>* chunks);
  nlohmann::json chunk(size_t index, const std::string& text, size_t lp_begin, const std::string& finish);
  nlohmann::json logprobs_json(const Choice& c, size_t begin, size_t end, size_t text_offset) const;
  nlohmann::json usage() const;

  SessionContext ctx_;
  CompletionParams params_;
  std::vector<int32_t> prompt_;
  int64_t max_new_tokens_ = 0;
  std::string id_;
  int64_t created_ = 0;
  std::vector<Choice> choices_;
  std::shared_ptr<EventQueue> events_ = std::make_shared<EventQueue>();
  std::deque<GenerationEvent> pending_;
  std::string error_;
};

}  // namespace rinfer::server

#pragma once
// The OpenAI request side of /v1/completions and /v1/chat/completions:
// parsing and strict validation (malformed JSON, wrong types, out-of-range
// values and unknown fields are all 400s with a message naming the field),
// and the error object every failure is returned as.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/chat_prompt.h"

namespace rinfer::server {

// An error the client sees: HTTP status plus OpenAI's error object.
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string type, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type, param, code;
};

// {"error": {"message", "type", "param", "code"}}; empty param/code are null.
std::string error_body(const std::string& message, const std::string& type, const std::string& param = "",
                       const std::string& code = "");

struct CompletionParams {
  bool chat = false;
  std::string model;
  // Completions: prompt text, or token ids used as given (prompt_is_ids).
  std::string prompt;
  bool prompt_is_ids = false;
  std::vector<int32_t> prompt_ids;
  std::vector<ChatMessage> messages;  // chat
  std::optional<int64_t> max_tokens;
  double temperature = 1.0, top_p = 1.0, repetition_penalty = 1.0;
  int32_t top_k = 0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  int n = 1;
  bool stream = false, include_usage = false;
  int logprobs = -1;  // -1: none; k: the sampled token's logprob plus the k most likely
  int priority = 0;
  bool ignore_eos = false;        // extension (as vLLM): do not stop at EOS
  bool return_token_ids = false;  // extension: choices carry "token_ids", the response "prompt_token_ids"
};

// Throws ApiError(400) on anything it cannot accept.
CompletionParams parse_completion_request(const std::string& body, bool chat, int max_n);

}  // namespace rinfer::server

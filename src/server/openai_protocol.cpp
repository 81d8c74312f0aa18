#include "core/json_file.h"
#include "server/openai_protocol.h"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

namespace rinfer::server {

using json = nlohmann::json;

std::string error_body(const std::string& message, const std::string& type, const std::string& param,
                       const std::string& code) {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

[[noreturn]] void invalid(const std::string& param, const std::string& msg) {
  throw ApiError(400, msg, "invalid_request_error", param);
}

const char* type_name(const json& v) { return v.type_name(); }

bool get_bool(const json& v, const std::string& key) {
  if (!v.is_boolean()) invalid(key, "'" + key + "' must be a boolean, got " + type_name(v));
  return v.get<bool>();
}

double get_number(const json& v, const std::string& key, double lo, double hi) {
  if (!v.is_number()) invalid(key, "'" + key + "' must be a number, got " + type_name(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    invalid(key, "'" + key + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " + v.dump());
  return x;
}

int64_t get_int(const json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) invalid(key, "'" + key + "' must be an integer, got " + type_name(v));
  // Unsigned values above INT64_MAX are out of range too.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    invalid(key, "'" + key + "' is out of range: " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    invalid(key, "'" + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                     std::to_string(x));
  return x;
}

std::string get_string(const json& v, const std::string& key) {
  if (!v.is_string()) invalid(key, "'" + key + "' must be a string, got " + type_name(v));
  return v.get<std::string>();
}

// OpenAI fields rinfer accepts only at their no-op values.
void require_default(const json& v, const std::string& key) {
  const bool ok = (v.is_number() && v.get<double>() == 0.0) || (v.is_object() && v.empty()) ||
                  (key == "echo" && v.is_boolean() && !v.get<bool>()) ||
                  (key == "best_of" && v.is_number_integer() && v.get<int64_t>() == 1) ||
                  (key == "tool_choice" && v == "none") || (key == "parallel_tool_calls" && v.is_boolean()) ||
                  (key == "store" && v.is_boolean() && !v.get<bool>()) ||
                  (key == "response_format" && v.is_object() && v.size() == 1 && v.contains("type") && v["type"] == "text") ||
                  (key == "tools" && v.is_array() && v.empty());
  if (!ok) invalid(key, "'" + key + "' is not supported by this server (got " + v.dump() + ")");
}

std::string message_content(const json& c, const std::string& key) {
  if (c.is_string()) return c.get<std::string>();
  // The content-parts form: [{"type": "text", "text": "..."}, ...]
  if (!c.is_array()) invalid(key, "'" + key + "' must be a string or an array of text parts, got " + type_name(c));
  std::string out;
  for (const auto& part : c) {
    // json::value() would throw a type error on a non-string "type".
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      invalid(key, "'" + key + "': only {\"type\": \"text\", \"text\": ...} parts are supported");
    for (const auto& [k, v] : part.items())
      if (k != "type" && k != "text") invalid(key, "'" + key + "': unknown field '" + k + "' in a content part");
    out += part["text"].get<std::string>();
  }
  return out;
}

std::vector<ChatMessage> parse_messages(const json& v) {
  if (!v.is_array() || v.empty()) invalid("messages", "'messages' must be a non-empty array");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& m = v[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) invalid(where, "'" + where + "' must be an object");
    ChatMessage msg;
    bool has_content = false;
    for (const auto& [k, val] : m.items()) {
      if (k == "role") {
        msg.role = get_string(val, where + ".role");
      } else if (k == "content") {
        if (!val.is_null()) msg.content = message_content(val, where + ".content");
        has_content = true;
      } else if (k == "name") {
        get_string(val, where + ".name");
      } else {
        invalid(where + "." + k, "unknown field '" + k + "' in " + where);
      }
    }
    static const std::set<std::string> roles = {"system", "developer", "user", "assistant"};
    if (!roles.count(msg.role))
      invalid(where + ".role", "'" + where + ".role' must be system, developer, user or assistant");
    if (!has_content) invalid(where + ".content", "'" + where + ".content' is required");
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

CompletionParams parse_completion_request(const std::string& body, bool chat, int max_n) {
  if (json_depth(body) > kMaxJsonDepth)
    invalid("", "the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) invalid("", "the request body is not valid JSON");
  if (!j.is_object()) invalid("", "the request body must be a JSON object");
  CompletionParams p;
  p.chat = chat;
  bool has_model = false, has_input = false, chat_logprobs = false;
  int top_logprobs = -1;
  for (const auto& [key, v] : j.items()) {
    if (v.is_null() && key != "model" && key != "prompt" && key != "messages") continue;  // null = not given
    if (key == "model") {
      p.model = get_string(v, key);
      has_model = true;
    } else if (!chat && key == "prompt") {
      has_input = true;
      if (v.is_string()) {
        p.prompt = v.get<std::string>();
      } else if (v.is_array() && v.size() == 1 && v[0].is_string()) {
        p.prompt = v[0].get<std::string>();
      } else if (v.is_array() && !v.empty() && v[0].is_number()) {
        p.prompt_is_ids = true;
        for (const auto& id : v) p.prompt_ids.push_back(int32_t(get_int(id, "prompt", 0, INT32_MAX)));
      } else {
        invalid(key, "'prompt' must be a string, a one-string array or an array of token ids");
      }
    } else if (chat && key == "messages") {
      p.messages = parse_messages(v);
      has_input = true;
    } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
      p.max_tokens = get_int(v, key, 1, INT32_MAX);
    } else if (key == "temperature") {
      p.temperature = get_number(v, key, 0, 2);
    } else if (key == "top_p") {
      p.top_p = get_number(v, key, 0, 1);
      if (p.top_p <= 0) invalid(key, "'top_p' must be > 0");
    } else if (key == "top_k") {
      // -1 means off in vLLM's API; accepted the same way.
      const int64_t k = get_int(v, key, -1, INT32_MAX);
      p.top_k = k < 0 ? 0 : int32_t(k);
    } else if (key == "repetition_penalty") {
      p.repetition_penalty = get_number(v, key, 0, 100);
      if (p.repetition_penalty <= 0) invalid(key, "'repetition_penalty' must be > 0");
    } else if (key == "seed") {
      p.seed = uint64_t(get_int(v, key, INT64_MIN, INT64_MAX));
    } else if (key == "stop") {
      if (v.is_string()) {
        p.stop.push_back(v.get<std::string>());
      } else if (v.is_array() && v.size() <= 4) {
        for (const auto& s : v) p.stop.push_back(get_string(s, key));
      } else {
        invalid(key, "'stop' must be a string or an array of at most 4 strings");
      }
    } else if (key == "n") {
      p.n = int(get_int(v, key, 1, max_n));
    } else if (key == "stream") {
      p.stream = get_bool(v, key);
    } else if (key == "stream_options") {
      if (!v.is_object()) invalid(key, "'stream_options' must be an object");
      for (const auto& [k2, v2] : v.items()) {
        if (k2 != "include_usage") invalid(key + "." + k2, "unknown field '" + k2 + "' in 'stream_options'");
        p.include_usage = get_bool(v2, "stream_options.include_usage");
      }
    } else if (!chat && key == "logprobs") {
      p.logprobs = int(get_int(v, key, 0, 20));
    } else if (chat && key == "logprobs") {
      chat_logprobs = get_bool(v, key);
    } else if (chat && key == "top_logprobs") {
      top_logprobs = int(get_int(v, key, 0, 20));
    } else if (key == "priority") {
      p.priority = int(get_int(v, key, -1000000, 1000000));
    } else if (key == "ignore_eos") {
      p.ignore_eos = get_bool(v, key);
    } else if (key == "return_token_ids") {
      p.return_token_ids = get_bool(v, key);
    } else if (key == "user") {
      get_string(v, key);  // accepted, unused
    } else if (key == "presence_penalty" || key == "frequency_penalty" || key == "logit_bias" ||
               (!chat && (key == "echo" || key == "best_of" || key == "suffix")) ||
               (chat && (key == "tools" || key == "tool_choice" || key == "parallel_tool_calls" || key == "store" ||
                         key == "response_format" || key == "metadata"))) {
      require_default(v, key);
    } else {
      invalid(key, "unknown field '" + key + "'");
    }
  }
  if (!has_model) invalid("model", "'model' is required");
  if (!has_input) invalid(chat ? "messages" : "prompt", chat ? "'messages' is required" : "'prompt' is required");
  if (chat) {
    if (top_logprobs >= 0 && !chat_logprobs) invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (chat_logprobs) p.logprobs = std::max(top_logprobs, 0);
  }
  if (p.include_usage && !p.stream) invalid("stream_options", "'stream_options' is only allowed with 'stream': true");
  return p;
}

}  // namespace rinfer::server

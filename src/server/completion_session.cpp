#include "server/completion_session.h"

#include <ctime>
#include <random>

#include "core/error.h"

namespace rinfer::server {

using json = nlohmann::json;

namespace {
std::string random_hex(int n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s += digits[rng() & 15];
  return s;
}

// A token as logprobs show it: its piece, SentencePiece's word marker as a space.
std::string token_text(const Tokenizer& tok, int32_t id) {
  if (id < 0 || id >= tok.vocab_size()) return "";
  std::string p = tok.id_to_piece(id);
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += p[i];
    }
  }
  return out;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}
}  // namespace

CompletionSession::CompletionSession(const SessionContext& ctx, CompletionParams params)
    : ctx_(ctx), params_(std::move(params)) {
  const std::string input_param = params_.chat ? "messages" : "prompt";
  try {
    if (params_.chat && ctx_.chat_template) {
      // As transformers' apply_chat_template(tokenize=True): the template
      // writes any BOS itself, so no special tokens are added on encoding.
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      for (const auto& m : params_.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
      ChatTemplateOptions opt;
      opt.add_generation_prompt = true;
      prompt_ = ctx_.tokenizer.encode(ctx_.chat_template->render(messages, opt), /*add_special=*/false);
    } else if (params_.chat)
      prompt_ = ctx_.tokenizer.encode(render_chat_prompt(params_.messages), /*add_special=*/true);
    else if (params_.prompt_is_ids)
      prompt_ = params_.prompt_ids;
    else
      prompt_ = ctx_.tokenizer.encode(params_.prompt, /*add_special=*/true);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error", input_param);
  }
  if (prompt_.empty()) throw ApiError(400, "the prompt is empty", "invalid_request_error", input_param);
  for (int32_t id : prompt_)
    if (id >= ctx_.engine.vocab_size())
      throw ApiError(400, str("token id ", id, " is outside the vocabulary [0, ", ctx_.engine.vocab_size(), ")"),
                     "invalid_request_error", input_param);
  const int64_t max_len = ctx_.engine.max_model_len();
  const int64_t n_prompt = int64_t(prompt_.size());
  if (n_prompt >= max_len)
    throw ApiError(400,
                   str("This model's maximum context length is ", max_len, " tokens; the prompt has ", n_prompt,
                       " tokens, leaving no room for output"),
                   "invalid_request_error", input_param, "context_length_exceeded");
  const int64_t limit = ctx_.max_tokens_limit > 0 ? std::min(ctx_.max_tokens_limit, max_len) : max_len;
  if (params_.max_tokens) {
    if (*params_.max_tokens > limit)
      throw ApiError(400, str("'max_tokens' must be at most ", limit, ", got ", *params_.max_tokens),
                     "invalid_request_error", "max_tokens");
    if (n_prompt + *params_.max_tokens > max_len)
      throw ApiError(400,
                     str("This model's maximum context length is ", max_len, " tokens; you requested ",
                         n_prompt + *params_.max_tokens, " (", n_prompt, " in the prompt, ", *params_.max_tokens,
                         " for the completion)"),
                     "invalid_request_error", "max_tokens", "context_length_exceeded");
    max_new_tokens_ = *params_.max_tokens;
  } else {
    // OpenAI's defaults: 16 for completions, the rest of the context for chat.
    max_new_tokens_ = std::min(limit, params_.chat ? max_len - n_prompt : std::min<int64_t>(16, max_len - n_prompt));
  }
  id_ = (params_.chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
  created_ = int64_t(std::time(nullptr));
}

CompletionSession::~CompletionSession() { cancel(); }

void CompletionSession::start() {
  const uint64_t base_seed = params_.seed ? *params_.seed : std::random_device{}();
  choices_.resize(size_t(params_.n));
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    c.detok = std::make_unique<StreamingDetokenizer>(ctx_.tokenizer);
    // Primed with the prompt, so the first piece keeps its leading space.
    for (int32_t id : prompt_) c.detok->push(id);
    c.stop = std::make_unique<StopMatcher>(params_.stop);
    GenerationRequest r;
    r.prompt = prompt_;
    r.max_new_tokens = max_new_tokens_;
    r.sampling.temperature = float(params_.temperature);
    r.sampling.top_p = float(params_.top_p);
    r.sampling.top_k = params_.top_k;
    r.sampling.repetition_penalty = float(params_.repetition_penalty);
    r.sampling.seed = base_seed + i;
    if (!params_.ignore_eos) r.stop_ids = ctx_.eos_ids;
    r.priority = params_.priority;
    r.top_logprobs = params_.logprobs;
    try {
      c.engine_id = ctx_.engine.submit(std::move(r), [q = events_](const GenerationEvent& ev) { q->push(ev); });
    } catch (const QueueFullError& e) {
      cancel();
      throw ApiError(503, e.what(), "server_error", "", "server_overloaded");
    } catch (const Error& e) {
      cancel();
      throw ApiError(400, e.what(), "invalid_request_error");
    }
  }
}

void CompletionSession::cancel() {
  for (auto& c : choices_)
    if (c.engine_id >= 0 && !c.engine_done) ctx_.engine.cancel(c.engine_id);
}

void CompletionSession::abandon() {
  cancel();
  // A cancel lands at the engine's next step; one long prefill step is the
  // most this waits for.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < until) poll(std::chrono::milliseconds(50), nullptr);
  for (auto& c : choices_)
    if (c.engine_id >= 0 && !c.engine_done) {
      c.engine_done = true;
      ctx_.metrics.observe_finished("cancelled", GenerationEvent{});
    }
}

bool CompletionSession::done() const {
  for (const auto& c : choices_)
    if (!c.engine_done) return false;
  return true;
}

bool CompletionSession::poll(std::chrono::milliseconds timeout, std::vector<json>* chunks) {
  if (!events_->pop_all(pending_, timeout)) return false;
  while (!pending_.empty()) {
    handle(pending_.front(), chunks);
    pending_.pop_front();
  }
  return true;
}

void CompletionSession::handle(const GenerationEvent& ev, std::vector<json>* chunks) {
  size_t index = 0;
  while (index < choices_.size() && choices_[index].engine_id != ev.request_id) ++index;
  if (index == choices_.size()) return;
  Choice& c = choices_[index];
  std::string out;
  const size_t lp_begin = c.logprobs.size();
  // Tokens after a stop string are the engine running on until our cancel lands.
  if (ev.token >= 0 && c.finish_reason.empty()) {
    c.ids.push_back(ev.token);
    if (params_.logprobs >= 0) c.logprobs.push_back({ev.token, ev.logprob, ev.top_logprobs});
    std::string piece = c.detok->push(ev.token);
    if (ev.finished) piece += c.detok->flush();
    out = c.stop->push(piece);
    if (c.stop->stopped()) {
      c.finish_reason = "stop";
      if (!ev.finished) ctx_.engine.cancel(c.engine_id);
    }
  }
  if (ev.finished) {
    c.engine_done = true;
    if (c.finish_reason.empty()) {
      out += c.stop->flush();  // held back as a possible stop string start; none came
      switch (ev.finish_reason) {
        case FinishReason::Stop: c.finish_reason = "stop"; break;
        case FinishReason::Length: c.finish_reason = "length"; break;
        case FinishReason::Cancelled: c.finish_reason = "cancelled"; break;
        case FinishReason::Error:
        case FinishReason::None:
          c.finish_reason = "error";
          error_ = ev.error.empty() ? "the engine failed this request" : ev.error;
          break;
      }
    }
    ctx_.metrics.observe_finished(c.finish_reason, ev);
  }
  c.text += out;
  if (!chunks) return;
  // The client learns of the end once: at the stop string, or at the
  // engine's last event (a cancelled or failed choice has no one to tell,
  // or ends the stream with an error object).
  const bool ends = !c.finish_sent && !c.finish_reason.empty() && c.finish_reason != "cancelled" &&
                    c.finish_reason != "error";
  if (out.empty() && c.logprobs.size() == lp_begin && !ends && !(params_.chat && !c.role_sent)) return;
  if (ends) c.finish_sent = true;
  chunks->push_back(chunk(index, out, lp_begin, ends ? c.finish_reason : ""));
}

json CompletionSession::logprobs_json(const Choice& c, size_t begin, size_t end, size_t text_offset) const {
  if (params_.logprobs < 0 || begin >= end) return nullptr;
  if (params_.chat) {
    json content = json::array();
    for (size_t i = begin; i < end; ++i) {
      const auto& lp = c.logprobs[i];
      const std::string t = token_text(ctx_.tokenizer, lp.id);
      json top = json::array();
      for (const auto& alt : lp.top) {
        const std::string s = token_text(ctx_.tokenizer, alt.id);
        top.push_back({{"token", s}, {"logprob", alt.logprob}, {"bytes", bytes_of(s)}});
      }
      content.push_back({{"token", t}, {"logprob", lp.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = begin; i < end; ++i) {
    const auto& lp = c.logprobs[i];
    const std::string t = token_text(ctx_.tokenizer, lp.id);
    tokens.push_back(t);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const auto& alt : lp.top) top[token_text(ctx_.tokenizer, alt.id)] = alt.logprob;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += t.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json CompletionSession::chunk(size_t index, const std::string& text, size_t lp_begin, const std::string& finish) {
  Choice& c = choices_[index];
  json ch = {{"index", index}};
  const json lp = logprobs_json(c, lp_begin, c.logprobs.size(), c.text.size() - text.size());
  if (params_.chat) {
    json delta = json::object();
    if (!c.role_sent) {
      delta["role"] = "assistant";
      delta["content"] = text;
      c.role_sent = true;
    } else if (!text.empty()) {
      delta["content"] = text;
    }
    ch["delta"] = delta;
  } else {
    ch["text"] = text;
  }
  ch["logprobs"] = lp;
  ch["finish_reason"] = finish.empty() ? json(nullptr) : json(finish);
  json j = {{"id", id_},
            {"object", params_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", ctx_.model_name},
            {"choices", json::array({ch})}};
  if (params_.include_usage) j["usage"] = nullptr;
  return j;
}

json CompletionSession::usage() const {
  int64_t completion = 0;
  for (const auto& c : choices_) completion += int64_t(c.ids.size());
  const int64_t prompt = int64_t(prompt_.size());
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json CompletionSession::usage_chunk() const {
  return {{"id", id_},
          {"object", params_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", ctx_.model_name},
          {"choices", json::array()},
          {"usage", usage()}};
}

json CompletionSession::response() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json ch = {{"index", i}};
    if (params_.chat)
      ch["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      ch["text"] = c.text;
    ch["logprobs"] = logprobs_json(c, 0, c.logprobs.size(), 0);
    ch["finish_reason"] = c.finish_reason;
    if (params_.return_token_ids) ch["token_ids"] = c.ids;
    choices.push_back(ch);
  }
  json j = {{"id", id_},
            {"object", params_.chat ? "chat.completion" : "text_completion"},
            {"created", created_},
            {"model", ctx_.model_name},
            {"choices", choices},
            {"usage", usage()}};
  if (params_.return_token_ids) j["prompt_token_ids"] = prompt_;
  return j;
}

}  // namespace rinfer::server

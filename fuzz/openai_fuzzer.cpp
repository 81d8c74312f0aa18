// OpenAI request bodies: parse_completion_request for /v1/chat/completions
// and /v1/completions (what the HTTP server calls on every POST), then the
// chat messages rendered to a prompt. Its contract is stricter than the
// other parsers': every rejection is an ApiError (a 400); any other
// exception would reach the client as a 500, so it is a finding here.
#include "fuzz_util.h"
#include "server/chat_prompt.h"
#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (bool chat : {true, false}) {
    try {
      const rinfer::server::CompletionParams p = rinfer::server::parse_completion_request(body, chat, /*max_n=*/4);
      if (p.chat != chat || p.n < 1 || p.n > 4 || p.stop.size() > 4) __builtin_trap();
      if (chat) rinfer::server::render_chat_prompt(p.messages);
    } catch (const rinfer::server::ApiError& e) {
      if (e.status != 400) __builtin_trap();
    }
  }
  return 0;
}

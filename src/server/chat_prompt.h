#pragma once
// Chat messages -> prompt text. The tokenizer's own chat template (Jinja in
// tokenizer_config.json) is not rendered yet; until it is, every model gets
// this plain, documented format (docs/serving.md):
//
//   <system content>\n\n          (each system / developer message)
//   User: <content>\n
//   Assistant: <content>\n
//   ...
//   Assistant:                     (the model continues from here)
//
// It suits base models (such as the stories260K test model) and is a
// stop-gap for chat-tuned ones, which expect their own template.
#include <string>
#include <vector>

namespace rinfer::server {

struct ChatMessage {
  std::string role;  // system | developer | user | assistant
  std::string content;
};

std::string render_chat_prompt(const std::vector<ChatMessage>& messages);

}  // namespace rinfer::server

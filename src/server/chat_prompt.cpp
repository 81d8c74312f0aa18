#include "server/chat_prompt.h"

namespace rinfer::server {

std::string render_chat_prompt(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system" || m.role == "developer")
      out += m.content + "\n\n";
    else if (m.role == "user")
      out += "User: " + m.content + "\n";
    else
      out += "Assistant: " + m.content + "\n";
  }
  out += "Assistant:";
  return out;
}

}  // namespace rinfer::server

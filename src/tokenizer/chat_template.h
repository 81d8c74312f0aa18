#pragma once
// A model's chat template (tokenizer_config.json "chat_template", or a
// chat_template.jinja file next to it) rendered as transformers'
// apply_chat_template renders it: variables messages, add_generation_prompt,
// tools (None when not given), documents (None), and the special tokens of
// tokenizer_config.json as strings (bos_token, eos_token, ... only those
// that are set; additional_special_tokens when non-empty). The template is
// untrusted input: it parses and renders under a jinja::Budget (nesting,
// recursion, steps, sizes; jinja/budget.h), and going past it is a
// one-line rinfer::Error like any other template error.
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/budget.h"

namespace rinfer {

namespace jinja {
class Template;
}

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  nlohmann::ordered_json tools;                                  // null: None
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables (enable_thinking, ...)
};

class ChatTemplate {
 public:
  // dir: a directory with tokenizer_config.json (and maybe
  // chat_template.jinja), or a tokenizer_config.json file. Throws
  // rinfer::Error when there is no template or it does not parse.
  static ChatTemplate load(const std::filesystem::path& dir, const jinja::Budget& budget = {});
  // From template source and the special-token variables.
  ChatTemplate(const std::string& source, nlohmann::ordered_json special_tokens, const jinja::Budget& budget = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;

  // messages: a JSON list of {"role": ..., "content": ...} objects.
  std::string render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& opt = {}) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  nlohmann::ordered_json special_tokens_;
  std::unique_ptr<jinja::Template> tmpl_;
};

}  // namespace rinfer

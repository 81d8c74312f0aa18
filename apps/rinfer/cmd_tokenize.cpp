// rinfer tokenize / detokenize / chat-template: the tokenizer and the chat
// template of a model on their own, to compare with transformers.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rinfer::cli {

namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

ojson parse_json(const std::string& text, const std::string& what) {
  check_json_depth(text, what);
  try {
    return ojson::parse(text);
  } catch (const ojson::exception& e) {
    fail(what, " is not valid JSON: ", e.what());
  }
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

struct TokenizeOptions {
  std::string tokenizer, text, file, jsonl;
  bool add_special = false, no_parse_special = false, json = false;
};

struct DetokenizeOptions {
  std::string tokenizer, ids;
  bool skip_special = false, json = false;
};

struct ChatTemplateCliOptions {
  std::string model, messages, tools;
  bool add_generation_prompt = false, json = false;
};

}  // namespace

Runner add_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids, as transformers' tokenizer.encode");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "Model directory, tokenizer.json, tokenizer.model (SentencePiece or tiktoken), *.tiktoken or .gguf vocabulary")
      ->required();
  auto* t = cmd->add_option("--text", o->text, "Text to tokenize");
  auto* f = cmd->add_option("--file", o->file, "Tokenize a whole file")->excludes(t);
  auto* j = cmd->add_option("--jsonl", o->jsonl, "One {\"text\": ...} per line in, one {\"ids\": [...]} per line out")
                ->excludes(t)
                ->excludes(f);
  cmd->add_flag("--add-special", o->add_special, "Add BOS/EOS as the tokenizer's config says (add_special_tokens=True)");
  cmd->add_flag("--no-parse-special", o->no_parse_special,
                "Leave special-token text such as <s> as text (llama.cpp's test-vector convention)");
  cmd->add_flag("--json", o->json, "Print {\"ids\": [...]}");
  return [o, t, f, j]() -> int {
    RINFER_CHECK(t->count() + f->count() + j->count() == 1, "tokenize: give one of --text, --file, --jsonl");
    const auto tok = Tokenizer::load(o->tokenizer);
    auto encode = [&](const std::string& s) {
      return o->no_parse_special ? tok->encode_no_parse_special(s, o->add_special) : tok->encode(s, o->add_special);
    };
    if (!o->jsonl.empty()) {
      std::istringstream in(read_file(o->jsonl, "--jsonl"));
      int n = 0;
      for (std::string line; std::getline(in, line);) {
        ++n;
        if (line.empty()) continue;
        const ojson in_j = parse_json(line, "--jsonl line " + std::to_string(n));
        RINFER_CHECK(in_j.is_object() && in_j.contains("text") && in_j["text"].is_string(), "--jsonl line ", n,
                     ": expected {\"text\": \"...\"}");
        std::printf("%s\n", dump(ojson{{"ids", encode(in_j["text"].get<std::string>())}}).c_str());
      }
      return 0;
    }
    const std::string text = o->file.empty() ? o->text : read_file(o->file, "--file");
    const auto ids = encode(text);
    if (o->json)
      std::printf("%s\n", dump(ojson{{"ids", ids}}).c_str());
    else
      std::printf("%s\n", ids_text(ids).c_str());
    return 0;
  };
}

Runner add_detokenize(CLI::App& app) {
  auto o = std::make_shared<DetokenizeOptions>();
  auto* cmd = app.add_subcommand("detokenize", "Token ids to text, as transformers' tokenizer.decode");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "Model directory, tokenizer.json, tokenizer.model (SentencePiece or tiktoken), *.tiktoken or .gguf vocabulary")
      ->required();
  cmd->add_option("--ids", o->ids, "Comma-separated token ids")->required();
  cmd->add_flag("--skip-special", o->skip_special, "Drop special tokens (skip_special_tokens=True)");
  cmd->add_flag("--json", o->json, "Print {\"text\": \"...\"}");
  return [o]() -> int {
    std::vector<int32_t> ids;
    try {
      ids = parse_ids(o->ids);
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.starts_with("--prompt-ids")) msg.replace(0, 12, "--ids");
      throw Error(msg);
    }
    const auto tok = Tokenizer::load(o->tokenizer);
    const std::string text = tok->decode(ids, o->skip_special);
    if (o->json)
      std::printf("%s\n", dump(ojson{{"text", text}}).c_str());
    else
      std::printf("%s\n", text.c_str());
    return 0;
  };
}

Runner add_chat_template(CLI::App& app) {
  auto o = std::make_shared<ChatTemplateCliOptions>();
  auto* cmd = app.add_subcommand("chat-template", "Render a conversation with the model's chat template");
  cmd->add_option("--model", o->model, "Directory holding tokenizer_config.json")->required();
  cmd->add_option("--messages", o->messages, "JSON file: a list of {\"role\", \"content\"} messages")->required();
  cmd->add_option("--tools", o->tools, "JSON file: a list of tool definitions (the template's `tools`)");
  cmd->add_flag("--add-generation-prompt", o->add_generation_prompt, "End with the assistant turn's header");
  cmd->add_flag("--json", o->json, "Print {\"prompt\": \"...\"}");
  return [o]() -> int {
    ojson messages = parse_json(read_file(o->messages, "--messages"), o->messages);
    // Also accept {"messages": [...]} (the shape of chat_cases.jsonl lines).
    if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];
    RINFER_CHECK(messages.is_array(), "--messages: ", o->messages, " must hold a JSON list of messages");
    ChatTemplateOptions opt;
    opt.add_generation_prompt = o->add_generation_prompt;
    if (!o->tools.empty()) opt.tools = parse_json(read_file(o->tools, "--tools"), o->tools);
    const std::string prompt = ChatTemplate::load(o->model).render(messages, opt);
    if (o->json)
      std::printf("%s\n", dump(ojson{{"prompt", prompt}}).c_str());
    else
      std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    return 0;
  };
}

}  // namespace rinfer::cli

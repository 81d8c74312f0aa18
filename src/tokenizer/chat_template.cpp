#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/jinja/template.h"

namespace rinfer {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  RINFER_CHECK(in, "chat template: cannot read ", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special token's text: "<s>" or an AddedToken object {"content": "<s>"}.
std::optional<std::string> token_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, ojson special_tokens, const jinja::Budget& budget)
    : source_(source),
      special_tokens_(std::move(special_tokens)),
      tmpl_(std::make_unique<jinja::Template>(source, budget)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::load(const fs::path& path, const jinja::Budget& budget) {
  std::error_code ec;
  RINFER_CHECK(fs::exists(path, ec), "chat template: no such file or directory: ", path.string());
  const fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
  const fs::path cfg_path = fs::is_directory(path, ec) ? dir / "tokenizer_config.json" : path;
  ojson cfg = ojson::object();
  if (fs::is_regular_file(cfg_path, ec)) {
    try {
      const std::string text = read_text(cfg_path);
      check_json_depth(text, "chat template: " + cfg_path.string());
      cfg = ojson::parse(text);
    } catch (const ojson::exception& e) {
      fail("chat template: ", cfg_path.string(), " is not valid JSON: ", e.what());
    }
    RINFER_CHECK(cfg.is_object(), "chat template: ", cfg_path.string(), " must hold a JSON object");
  }
  std::string source;
  // Newer transformers saves the template as its own file, which wins.
  if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
    source = read_text(dir / "chat_template.jinja");
  } else if (auto it = cfg.find("chat_template"); it != cfg.end() && !it->is_null()) {
    if (it->is_string()) {
      source = it->get<std::string>();
    } else {
      // A list of named templates: transformers uses "default".
      RINFER_CHECK(it->is_array(), "chat template: \"chat_template\" must be a string or a list");
      for (const auto& t : *it)
        if (t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
          source = t["template"].get<std::string>();
      RINFER_CHECK(!source.empty(), "chat template: ", cfg_path.string(), " has no \"default\" chat template");
    }
  } else {
    fail("chat template: ", dir.string(), " has no chat template (no \"chat_template\" in tokenizer_config.json)");
  }
  ojson specials = ojson::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (auto it = cfg.find(key); it != cfg.end())
      if (auto t = token_text(*it)) specials[key] = *t;
  }
  if (auto it = cfg.find("additional_special_tokens"); it != cfg.end() && it->is_array() && !it->empty()) {
    ojson list = ojson::array();
    for (const auto& v : *it)
      if (auto t = token_text(v)) list.push_back(*t);
    specials["additional_special_tokens"] = list;
  }
  return ChatTemplate(source, std::move(specials), budget);
}

std::string ChatTemplate::render(const ojson& messages, const ChatTemplateOptions& opt) const {
  RINFER_CHECK(messages.is_array(), "chat template: messages must be a JSON list");
  jinja::Dict g;
  g.set("messages", jinja::from_json(messages));
  g.set("add_generation_prompt", jinja::Value(opt.add_generation_prompt));
  g.set("tools", opt.tools.is_null() ? jinja::Value(jinja::None{}) : jinja::from_json(opt.tools));
  g.set("documents", jinja::Value(jinja::None{}));
  for (const auto& [k, v] : special_tokens_.items()) g.set(k, jinja::from_json(v));
  for (const auto& [k, v] : opt.extra.items()) g.set(k, jinja::from_json(v));
  return tmpl_->render(g);
}

}  // namespace rinfer

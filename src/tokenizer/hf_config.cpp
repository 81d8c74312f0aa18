#include "tokenizer/hf_config.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"

namespace rinfer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The parsed file, or nullopt when it does not exist.
std::optional<json> read_json(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  json j = read_json_file(path.string());
  RINFER_CHECK(j.is_object(), "tokenizer: ", path.string(), " must hold a JSON object");
  return j;
}

// Typed access with a one-line error naming the file and key; null reads as
// absent, as transformers treats it.
std::optional<bool> get_bool(const json& j, const char* key, const fs::path& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  RINFER_CHECK(it->is_boolean(), "tokenizer: ", file.string(), ": \"", key, "\" must be true or false");
  return it->get<bool>();
}

bool get_flag(const json& obj, const char* key, const fs::path& file, bool dflt) {
  return get_bool(obj, key, file).value_or(dflt);
}

// A special-token value: "<s>" or an AddedToken object {"content": "<s>", ...}.
std::optional<AddedTokenSpec> parse_token(const json& v, const std::string& what, const fs::path& file) {
  if (v.is_null()) return std::nullopt;
  AddedTokenSpec t;
  t.special = true;
  if (v.is_string()) {
    t.content = v.get<std::string>();
    return t;
  }
  RINFER_CHECK(v.is_object(), "tokenizer: ", file.string(), ": ", what,
               " must be a string or an object with \"content\"");
  auto c = v.find("content");
  RINFER_CHECK(c != v.end() && c->is_string(), "tokenizer: ", file.string(), ": ", what,
               " has no string \"content\"");
  t.content = c->get<std::string>();
  t.lstrip = get_flag(v, "lstrip", file, false);
  t.rstrip = get_flag(v, "rstrip", file, false);
  t.single_word = get_flag(v, "single_word", file, false);
  t.special = get_flag(v, "special", file, true);
  return t;
}

void read_role(const json& j, const char* key, const fs::path& file, HfTokenizerConfig::Role* role) {
  auto it = j.find(key);
  if (it == j.end()) return;
  role->present = true;
  role->token = parse_token(*it, str("\"", key, "\""), file);
}

std::vector<AddedTokenSpec> read_additional(const json& v, const fs::path& file) {
  std::vector<AddedTokenSpec> out;
  if (v.is_null()) return out;
  RINFER_CHECK(v.is_array(), "tokenizer: ", file.string(), ": \"additional_special_tokens\" must be a list");
  for (const auto& e : v) {
    auto t = parse_token(e, "an additional_special_tokens entry", file);
    if (t) out.push_back(*t);
  }
  return out;
}

int32_t parse_id(const std::string& s, const fs::path& file) {
  int32_t id = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  RINFER_CHECK(ec == std::errc() && p == s.data() + s.size() && id >= 0, "tokenizer: ", file.string(),
               ": added_tokens_decoder key \"", s, "\" is not a token id");
  return id;
}

void read_eos_ids(const json& j, const fs::path& file, std::vector<int32_t>* out) {
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return;
  auto add = [&](const json& v) {
    RINFER_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX, "tokenizer: ",
                 file.string(), ": \"eos_token_id\" must be a token id or a list of token ids");
    out->push_back(static_cast<int32_t>(v.get<int64_t>()));
  };
  if (it->is_array()) {
    for (const auto& v : *it) add(v);
  } else {
    add(*it);
  }
}

// tokenizer_config.json's keys into cfg; true when it has added_tokens_decoder.
bool read_tokenizer_config(const json& j, const fs::path& tc_path, HfTokenizerConfig& cfg) {
  bool has_decoder = false;
  cfg.add_bos_token = get_bool(j, "add_bos_token", tc_path);
  cfg.add_eos_token = get_bool(j, "add_eos_token", tc_path);
  read_role(j, "bos_token", tc_path, &cfg.bos);
  read_role(j, "eos_token", tc_path, &cfg.eos);
  read_role(j, "unk_token", tc_path, &cfg.unk);
  read_role(j, "pad_token", tc_path, &cfg.pad);
  if (auto it = j.find("additional_special_tokens"); it != j.end())
    cfg.additional_special_tokens = read_additional(*it, tc_path);
  if (auto it = j.find("added_tokens_decoder"); it != j.end() && !it->is_null()) {
    RINFER_CHECK(it->is_object(), "tokenizer: ", tc_path.string(), ": \"added_tokens_decoder\" must be an object");
    has_decoder = true;
    for (const auto& [key, v] : it->items()) {
      const int32_t id = parse_id(key, tc_path);
      auto t = parse_token(v, str("added_tokens_decoder[\"", key, "\"]"), tc_path);
      RINFER_CHECK(t.has_value(), "tokenizer: ", tc_path.string(), ": added_tokens_decoder[\"", key,
                   "\"] is null");
      // In added_tokens_decoder a missing "special" means a plain added token.
      if (v.is_object()) t->special = get_flag(v, "special", tc_path, false);
      cfg.added_tokens.emplace_back(id, *t);
    }
  }
  // transformers: legacy=None means legacy behaviour.
  cfg.legacy = get_bool(j, "legacy", tc_path).value_or(true);
  // LlamaTokenizer defaults add_prefix_space to True; an explicit null is
  // stored as None and reads as false in its `if self.add_prefix_space`.
  if (auto it = j.find("add_prefix_space"); it != j.end())
    cfg.add_prefix_space = get_bool(j, "add_prefix_space", tc_path).value_or(false);
  cfg.split_special_tokens = get_bool(j, "split_special_tokens", tc_path).value_or(false);
  cfg.clean_up_tokenization_spaces = get_bool(j, "clean_up_tokenization_spaces", tc_path).value_or(false);
  if (auto it = j.find("tokenizer_class"); it != j.end() && it->is_string())
    cfg.tokenizer_class = it->get<std::string>();
  return has_decoder;
}

}  // namespace

HfTokenizerConfig parse_hf_tokenizer_config_json(std::string_view text, const std::string& name) {
  const json j = parse_json_text(text, name);
  RINFER_CHECK(j.is_object(), "tokenizer: ", name, " must hold a JSON object");
  HfTokenizerConfig cfg;
  read_tokenizer_config(j, name, cfg);
  return cfg;
}

HfTokenizerConfig read_hf_tokenizer_config(const fs::path& dir) {
  HfTokenizerConfig cfg;
  bool has_decoder = false;
  const fs::path tc_path = dir / "tokenizer_config.json";
  if (auto tc = read_json(tc_path)) has_decoder = read_tokenizer_config(*tc, tc_path, cfg);
  // Since transformers 4.34, a tokenizer_config.json with added_tokens_decoder
  // is authoritative; the older files are only read without it.
  if (!has_decoder) {
    const fs::path sm_path = dir / "special_tokens_map.json";
    if (auto sm = read_json(sm_path)) {
      read_role(*sm, "bos_token", sm_path, &cfg.bos);
      read_role(*sm, "eos_token", sm_path, &cfg.eos);
      read_role(*sm, "unk_token", sm_path, &cfg.unk);
      read_role(*sm, "pad_token", sm_path, &cfg.pad);
      // transformers adds these to tokenizer_config.json's list.
      if (auto it = sm->find("additional_special_tokens"); it != sm->end()) {
        for (auto& t : read_additional(*it, sm_path)) {
          auto& list = cfg.additional_special_tokens;
          if (std::none_of(list.begin(), list.end(), [&](const auto& u) { return u.content == t.content; }))
            list.push_back(std::move(t));
        }
      }
    }
    const fs::path at_path = dir / "added_tokens.json";
    if (auto at = read_json(at_path)) {
      for (const auto& [content, v] : at->items()) {
        RINFER_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX,
                     "tokenizer: ", at_path.string(), ": the id of \"", content, "\" is not a token id");
        AddedTokenSpec t;
        t.content = content;
        cfg.added_tokens.emplace_back(static_cast<int32_t>(v.get<int64_t>()), t);
      }
    }
  }
  for (const char* name : {"generation_config.json", "config.json"}) {
    const fs::path p = dir / name;
    if (auto j = read_json(p)) read_eos_ids(*j, p, &cfg.eos_token_ids);
  }
  return cfg;
}

}  // namespace rinfer

#include "tokenizer/json_util.h"

#include "core/error.h"

namespace rinfer {

using nlohmann::json;

std::string json_type(const json& j, const char* what) {
  RINFER_CHECK(j.is_object(), "tokenizer: ", what, " must be an object or null");
  auto it = j.find("type");
  RINFER_CHECK(it != j.end() && it->is_string(), "tokenizer: ", what, " has no string \"type\"");
  return it->get<std::string>();
}

std::string json_string(const json& j, const char* key) {
  auto it = j.find(key);
  RINFER_CHECK(it != j.end() && it->is_string(), "tokenizer: \"", key, "\" must be a string in ",
               j.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 80));
  return it->get<std::string>();
}

bool json_bool(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  RINFER_CHECK(it->is_boolean(), "tokenizer: \"", key, "\" must be true or false");
  return it->get<bool>();
}

int64_t json_int(const json& j, const char* key, int64_t dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  RINFER_CHECK(it->is_number_integer(), "tokenizer: \"", key, "\" must be an integer");
  return it->get<int64_t>();
}

const json& json_array(const json& j, const char* key) {
  auto it = j.find(key);
  RINFER_CHECK(it != j.end() && it->is_array(), "tokenizer: \"", key, "\" must be a list");
  return *it;
}

std::unique_ptr<Regex> json_pattern(const json& j, const char* key) {
  auto it = j.find(key);
  RINFER_CHECK(it != j.end() && it->is_object(), "tokenizer: \"", key,
               "\" must be {\"String\": ...} or {\"Regex\": ...}");
  if (auto s = it->find("String"); s != it->end() && s->is_string())
    return std::make_unique<Regex>(s->get<std::string>(), /*literal=*/true);
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) return std::make_unique<Regex>(r->get<std::string>());
  fail("tokenizer: \"", key, "\" must be {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace rinfer

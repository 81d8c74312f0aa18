#pragma once
// Typed reads of tokenizer.json fields with one-line errors that name the
// field ("tokenizer: \"behavior\" must be a string in {...}").
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"

namespace rinfer {

// j["type"] of a component object; `what` names the component in errors.
std::string json_type(const nlohmann::json& j, const char* what);
std::string json_string(const nlohmann::json& j, const char* key);
// Missing or null → dflt.
bool json_bool(const nlohmann::json& j, const char* key, bool dflt);
int64_t json_int(const nlohmann::json& j, const char* key, int64_t dflt);
const nlohmann::json& json_array(const nlohmann::json& j, const char* key);
// A pattern field: {"String": "..."} (literal) or {"Regex": "..."}.
std::unique_ptr<Regex> json_pattern(const nlohmann::json& j, const char* key);

}  // namespace rinfer

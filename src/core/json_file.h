#pragma once
// Reading a JSON file with one-line errors ("cannot read PATH: reason",
// "PATH is not valid JSON: ..."): every config, index and manifest rinfer
// opens goes through here.
#include <string>

#include <nlohmann/json.hpp>

namespace rinfer {

nlohmann::json read_json_file(const std::string& path);

}  // namespace rinfer

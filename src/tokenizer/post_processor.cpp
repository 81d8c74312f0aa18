#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_util.h"

namespace rinfer {

using nlohmann::json;

namespace {

int32_t pair_id(const json& j, const char* key) {
  auto it = j.find(key);
  RINFER_CHECK(it != j.end() && it->is_array() && it->size() == 2 && (*it)[1].is_number_integer(),
               "tokenizer: post_processor \"", key, "\" must be [token, id]");
  return (*it)[1].get<int32_t>();
}

void apply(const json& j, PostProcessor* pp) {
  if (j.is_null()) return;
  const std::string type = json_type(j, "post_processor");
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    pp->prefix.push_back(pair_id(j, "cls"));
    pp->suffix.insert(pp->suffix.begin(), pair_id(j, "sep"));
    return;
  }
  if (type == "Sequence") {
    for (const auto& e : json_array(j, "processors")) apply(e, pp);
    return;
  }
  RINFER_CHECK(type == "TemplateProcessing", "tokenizer: unsupported post_processor type \"", type, "\"");
  const json specials = j.contains("special_tokens") ? j.at("special_tokens") : json::object();
  bool seen_sequence = false;
  for (const auto& item : json_array(j, "single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    auto st = item.find("SpecialToken");
    RINFER_CHECK(st != item.end() && st->contains("id") && st->at("id").is_string(),
                 "tokenizer: TemplateProcessing item must be a Sequence or a SpecialToken");
    const std::string name = st->at("id").get<std::string>();
    auto sp = specials.find(name);
    RINFER_CHECK(sp != specials.end() && sp->contains("ids") && sp->at("ids").is_array(),
                 "tokenizer: TemplateProcessing special token \"", name, "\" is not in special_tokens");
    auto& dst = seen_sequence ? pp->suffix : pp->prefix;
    for (const auto& id : sp->at("ids")) dst.push_back(id.get<int32_t>());
  }
}

}  // namespace

PostProcessor make_post_processor(const json& j) {
  PostProcessor pp;
  apply(j, &pp);
  return pp;
}

}  // namespace rinfer

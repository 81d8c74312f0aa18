#pragma once
// tokenizer.json post-processors, for a single sequence: the ids put before
// and after the encoded text when special tokens are requested.
// TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (adds
// nothing to ids), Sequence.
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rinfer {

struct PostProcessor {
  std::vector<int32_t> prefix, suffix;
};

// null → no ids added.
PostProcessor make_post_processor(const nlohmann::json& j);

}  // namespace rinfer

#pragma once
// What the Hugging Face JSON files next to a tokenizer say about special
// tokens, read the way transformers' from_pretrained reads them:
//   tokenizer_config.json   add_bos_token, add_eos_token, bos/eos/unk/pad
//                           tokens, additional_special_tokens,
//                           added_tokens_decoder, legacy, add_prefix_space,
//                           split_special_tokens
//   special_tokens_map.json only when tokenizer_config.json has no
//   added_tokens.json       added_tokens_decoder (older saves)
//   generation_config.json, config.json   eos_token_id (int or list)
// Back-end independent, so a tokenizer.json back-end can reuse it.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rinfer {

// transformers' AddedToken: a string matched in the text before the model
// sees it, with its whitespace-stripping switches.
struct AddedTokenSpec {
  std::string content;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool special = false;
};

struct HfTokenizerConfig {
  // nullopt = key absent (the back-end picks its default).
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  // A special-token role (bos_token, ...): `present` when the key is in the
  // JSON, `token` empty when its value is null.
  struct Role {
    bool present = false;
    std::optional<AddedTokenSpec> token;
  };
  Role bos, eos, unk, pad;
  std::vector<AddedTokenSpec> additional_special_tokens;
  // added_tokens_decoder (or added_tokens.json), by id.
  std::vector<std::pair<int32_t, AddedTokenSpec>> added_tokens;
  bool legacy = true;            // transformers treats a missing/null legacy as true
  bool add_prefix_space = true;  // only used when legacy is false
  bool split_special_tokens = false;
  // transformers' decode clean-up (" ." → "."); absent = false, as in
  // transformers >= 4.45.
  bool clean_up_tokenization_spaces = false;
  std::string tokenizer_class;
  // eos_token_id of generation_config.json and config.json, in that order.
  std::vector<int32_t> eos_token_ids;
};

// Reads whichever of the files exist in dir; none existing is fine (all
// defaults). Throws rinfer::Error for malformed JSON or wrongly typed keys.
HfTokenizerConfig read_hf_tokenizer_config(const std::filesystem::path& dir);
// What the tokenizer_config.json text alone says (`name`, its path, names it
// in the errors); the same checks.
HfTokenizerConfig parse_hf_tokenizer_config_json(std::string_view text, const std::string& name);

}  // namespace rinfer

#pragma once
// Loads a Hugging Face tokenizer.json (the "fast" tokenizer) and applies on
// top what transformers' AutoTokenizer does with tokenizer_config.json:
// special tokens of the config join the added vocabulary, LLaMA-class
// tokenizers get their post-processor rebuilt from add_bos_token /
// add_eos_token, and decode applies clean_up_tokenization_spaces.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/hf_config.h"
#include "tokenizer/tokenizer.h"

namespace rinfer {

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::filesystem::path& file, const HfTokenizerConfig& cfg);
// The same from the file's text; `name` (the path) names it in the errors.
std::unique_ptr<Tokenizer> load_hf_tokenizer_json_text(std::string_view text, const std::string& name,
                                                      const HfTokenizerConfig& cfg);

}  // namespace rinfer

#pragma once
// tokenizer.json pre-tokenizers: Split (string or regex, every delimiter
// behaviour, invert), ByteLevel, Metaspace, Digits, Whitespace,
// WhitespaceSplit, Punctuation, BertPreTokenizer, Sequence. A pre-tokenizer
// cuts each piece of normalized text into smaller pieces (and may rewrite
// them, as ByteLevel and Metaspace do); the model then runs on each piece on
// its own.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rinfer {

struct PreTokenized {
  std::vector<std::string> pieces;
  // pieces[0] starts at offset 0 of the text given to encode (Metaspace's
  // prepend_scheme "first" adds its ▁ only there).
  bool first_at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void apply(PreTokenized& pt) const = 0;
};

// null → nullptr. Unknown types throw rinfer::Error naming them.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j);

// A regex Split with behaviour Isolated (llama.cpp's pre-tokenizer lists).
std::unique_ptr<PreTokenizer> make_isolated_split(const std::string& regex);
// ByteLevel: optional prefix space and GPT-2 regex, then bytes → GPT-2 alphabet.
std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex);
// BertPreTokenizer: split on whitespace (removed) and punctuation (isolated).
std::unique_ptr<PreTokenizer> make_bert_pre_tokenizer();
std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> items);

}  // namespace rinfer

#pragma once
// Added tokens (tokenizer.json "added_tokens", plus the special tokens
// transformers adds from tokenizer_config.json): strings cut out of the text
// before normalization and BPE, as the tokenizers library's AddedVocabulary
// does. Tokens with normalized=false are matched in the raw text first; the
// rest of the text is normalized and then searched for normalized=true
// tokens. At each position the leftmost, then longest, token wins;
// single_word, lstrip and rstrip apply as in the library.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rinfer {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false;
  bool normalized = false;
  // lstrip / rstrip take only ASCII whitespace (llama.cpp's isspace), not Unicode's.
  bool strip_ascii = false;
};

class AddedVocabulary {
 public:
  // A piece of the input: plain text for the model (already normalized),
  // or an added token (id >= 0).
  struct Segment {
    std::string text;
    int32_t id = -1;
    bool at_start = false;  // text starts at offset 0 of the input
  };

  // A second token with the same content is ignored (the first one wins),
  // except that a special one makes the first one special.
  void add(const AddedToken& t);
  // parse_special=false: special tokens are left in the text (transformers'
  // split_special_tokens, llama.cpp's parse_special=false).
  std::vector<Segment> split(std::string_view text, const Normalizer* normalizer, bool parse_special) const;

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  int32_t max_id() const { return max_id_; }

 private:
  // A byte trie over the contents of one group (raw or normalized).
  struct Trie {
    std::vector<int32_t> token{-1};               // per node: index into tokens_ ending here, or -1
    std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) → node
    bool first[256] = {};
    void insert(std::string_view s, int32_t token);
    int32_t child(int32_t node, unsigned char b) const;
  };
  // Cuts the tokens of `trie` out of `text`; appends the pieces to out.
  void cut(const Trie& trie, std::string_view text, bool parse_special, bool at_start,
           std::vector<Segment>* out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, size_t> by_content_;
  std::unordered_map<int32_t, size_t> by_id_;
  Trie raw_, normalized_;
  int32_t max_id_ = -1;
};

}  // namespace rinfer

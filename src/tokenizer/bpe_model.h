#pragma once
// The BPE model of tokenizer.json (and of GGUF vocabularies): a word (one
// pre-token) becomes characters, then the best-ranked adjacent pair is
// merged until no pair has a merge. Options as the tokenizers library:
// byte_fallback (<0xXX> tokens for characters outside the vocabulary),
// unk/fuse_unk, ignore_merges, continuing_subword_prefix,
// end_of_word_suffix. Merges come from a merge list (rank = position) or,
// for SentencePiece vocabularies, from scores (any two tokens whose
// concatenation is a token merge; a higher score merges first).
// Long words use a heap of candidate pairs: O(n log n), never a rescan.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rinfer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Options {
    bool byte_fallback = false;
    bool fuse_unk = false;
    bool ignore_merges = false;
    int32_t unk_id = -1;
    std::string continuing_subword_prefix;
    std::string end_of_word_suffix;
  };

  // vocab: token string → id. merges: pairs of token strings, best first.
  BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options opt);
  // SentencePiece-style: merges derived from the scores of the tokens whose
  // `mergeable` flag is set (normal pieces; not control or byte pieces).
  BpeModel(TokenMap vocab, const std::vector<float>& scores, const std::vector<bool>& mergeable, Options opt);

  void encode(std::string_view word, std::vector<int32_t>* out) const;
  int32_t token_to_id(std::string_view token) const;  // -1 if absent
  // nullptr for an id the model does not have (a hole, or an added token).
  const std::string* id_to_token(int32_t id) const;
  int32_t size() const { return int32_t(tokens_.size()); }

 private:
  void index_tokens();
  void encode_uncached(std::string_view word, std::vector<int32_t>* out) const;
  void merge(std::vector<int32_t>& syms) const;

  // Identifies this model in the per-thread word cache (an address could be
  // reused by a later model).
  uint64_t serial_;
  TokenMap vocab_;
  std::vector<std::string> tokens_;  // by id; empty for holes
  std::vector<bool> present_;
  Options opt_;
  // (left id << 32 | right id) → (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  int32_t byte_ids_[256];  // <0xXX> tokens, -1 where missing
};

}  // namespace rinfer

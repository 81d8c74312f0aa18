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

#include "tokenizer/token_model.h"

namespace rinfer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// (left id << 32 | right id) → (rank, merged id): an open-addressing table
// (linear probing, at most 3/4 full). Flat, so building it for a vocabulary
// of 100K+ merges allocates once, and a lookup touches one cache line.
class MergeTable {
 public:
  using Value = std::pair<int32_t, int32_t>;
  void reserve(size_t n);
  // A key already present keeps its value (a repeated merge keeps its first rank).
  void try_emplace(uint64_t key, int32_t rank, int32_t merged);
  const Value* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  bool empty() const { return size_ == 0; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // ids are non-negative, so no real key
  struct Slot {
    uint64_t key = kEmpty;
    Value value;
  };
  size_t slot_of(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t capacity);

  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
  int shift_ = 64;
};

class BpeModel final : public TokenModel {
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
  BpeModel(const BpeModel&) = delete;  // tokens_ points into vocab_
  BpeModel& operator=(const BpeModel&) = delete;

  void encode(std::string_view word, std::vector<int32_t>* out) const override;
  int32_t token_to_id(std::string_view token) const override;  // -1 if absent
  // nullptr for an id the model does not have (a hole, or an added token).
  const std::string* id_to_token(int32_t id) const override;
  int32_t size() const override { return int32_t(tokens_.size()); }

 private:
  void index_tokens();
  void encode_uncached(std::string_view word, std::vector<int32_t>* out) const;
  void merge(std::vector<int32_t>& syms) const;

  // Identifies this model in the per-thread word cache (an address could be
  // reused by a later model).
  uint64_t serial_;
  TokenMap vocab_;
  std::vector<const std::string*> tokens_;  // by id: the key in vocab_ (nodes never move); nullptr for holes
  Options opt_;
  MergeTable merges_;
  // token → id as an open-addressing table over vocab_'s strings (a lookup
  // touches one slot and the string, where the node map chases pointers).
  struct IndexSlot {
    const std::string* token = nullptr;
    int32_t id = -1;
    uint32_t hash = 0;
  };
  std::vector<IndexSlot> index_;
  size_t index_mask_ = 0;
  int32_t byte_ids_[256];  // <0xXX> tokens, -1 where missing
};

}  // namespace rinfer

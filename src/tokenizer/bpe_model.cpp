#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <atomic>
#include <queue>

#include "core/error.h"

namespace rinfer {

namespace {

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

size_t char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

std::atomic<uint64_t> g_next_serial{1};

// Per-thread cache of recent words → ids, as the tokenizers library keeps
// one: natural text repeats its words, and a hit skips all merging. Per
// thread, so encode stays const and lock-free.
struct WordCache {
  uint64_t serial = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};
constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxWord = 64;  // longer words are rare and not worth keeping

// Words up to this many symbols are merged by rescanning (faster for the
// short words that make up almost all text); longer ones use the heap.
constexpr size_t kRescanMax = 24;

}  // namespace

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap * 3 < n * 4) cap *= 2;
  if (cap > slots_.size()) rehash(cap);
}

void MergeTable::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = slot_of(s.key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

void MergeTable::try_emplace(uint64_t key, int32_t rank, int32_t merged) {
  if ((size_ + 1) * 4 > slots_.size() * 3) rehash(std::max<size_t>(16, slots_.size() * 2));
  size_t i = slot_of(key);
  for (; slots_[i].key != kEmpty; i = (i + 1) & mask_)
    if (slots_[i].key == key) return;
  slots_[i] = {key, {rank, merged}};
  ++size_;
}

void BpeModel::index_tokens() {
  int32_t n = 0;
  for (const auto& [tok, id] : vocab_) {
    // Real vocabularies stay far below this; a corrupt file must not allocate gigabytes.
    RINFER_CHECK(id >= 0 && id < (1 << 24), "tokenizer: token \"", tok, "\" has implausible id ", id);
    n = std::max(n, id + 1);
  }
  tokens_.assign(size_t(n), nullptr);
  for (const auto& [tok, id] : vocab_) tokens_[size_t(id)] = &tok;
  size_t cap = 16;
  while (cap * 3 < vocab_.size() * 4) cap *= 2;
  index_.assign(cap, IndexSlot{});
  index_mask_ = cap - 1;
  for (const auto& [tok, id] : vocab_) {
    const size_t h = std::hash<std::string_view>{}(tok);
    size_t i = h & index_mask_;
    while (index_[i].token) i = (i + 1) & index_mask_;
    index_[i] = {&tok, id, uint32_t(h >> 32)};
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = token_to_id(name);
  }
  if (opt_.unk_id >= 0)
    RINFER_CHECK(opt_.unk_id < n && tokens_[size_t(opt_.unk_id)], "tokenizer: unk token id ", opt_.unk_id,
                 " is not in the vocabulary");
}

BpeModel::BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options opt)
    : serial_(g_next_serial++), vocab_(std::move(vocab)), opt_(std::move(opt)) {
  index_tokens();
  merges_.reserve(merges.size());
  const std::string& prefix = opt_.continuing_subword_prefix;
  std::string merged;  // reused: no allocation per merge
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = token_to_id(a), ib = token_to_id(b);
    RINFER_CHECK(ia >= 0 && ib >= 0, "tokenizer: merge \"", a, " ", b, "\" uses a token that is not in the vocabulary");
    // With a continuing-subword prefix the right part carries it; the merged
    // token has it only once, at its start.
    merged.assign(a);
    if (!prefix.empty() && b.starts_with(prefix))
      merged.append(b, prefix.size());
    else
      merged.append(b);
    const int32_t im = token_to_id(merged);
    RINFER_CHECK(im >= 0, "tokenizer: merge \"", a, " ", b, "\" gives \"", merged, "\", which is not in the vocabulary");
    merges_.try_emplace(pair_key(ia, ib), int32_t(rank), im);  // a repeated merge keeps its first rank
  }
}

BpeModel::BpeModel(TokenMap vocab, const std::vector<float>& scores, const std::vector<bool>& mergeable, Options opt)
    : serial_(g_next_serial++), vocab_(std::move(vocab)), opt_(std::move(opt)) {
  index_tokens();
  auto ok = [&](size_t id) { return tokens_[id] && id < mergeable.size() && mergeable[id] && id < scores.size(); };
  // Equal scores share a rank, so that ties go to the leftmost pair as in
  // SentencePiece's BPE.
  std::vector<float> distinct;
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (ok(id)) distinct.push_back(scores[id]);
  std::sort(distinct.begin(), distinct.end(), std::greater<>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (!ok(id)) continue;
    const std::string_view t = *tokens_[id];
    const auto rank =
        int32_t(std::lower_bound(distinct.begin(), distinct.end(), scores[id], std::greater<>()) - distinct.begin());
    for (size_t cut = 1; cut < t.size(); ++cut) {
      if ((static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) continue;  // inside a character
      const int32_t a = token_to_id(t.substr(0, cut)), b = token_to_id(t.substr(cut));
      if (a >= 0 && b >= 0) merges_.try_emplace(pair_key(a, b), rank, int32_t(id));
    }
  }
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  const size_t h = std::hash<std::string_view>{}(token);
  for (size_t i = h & index_mask_;; i = (i + 1) & index_mask_) {
    const IndexSlot& s = index_[i];
    if (!s.token) return -1;
    if (s.hash == uint32_t(h >> 32) && *s.token == token) return s.id;
  }
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= int32_t(tokens_.size())) return nullptr;
  return tokens_[size_t(id)];
}

void BpeModel::encode(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (word.size() > kCacheMaxWord) {
    encode_uncached(word, out);
    return;
  }
  thread_local WordCache cache;
  if (cache.serial != serial_) {
    cache.map.clear();
    cache.serial = serial_;
  }
  if (auto it = cache.map.find(word); it != cache.map.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t start = out->size();
  encode_uncached(word, out);
  if (cache.map.size() >= kCacheMaxEntries) cache.map.clear();
  cache.map.emplace(std::string(word), std::vector<int32_t>(out->begin() + std::ptrdiff_t(start), out->end()));
}

void BpeModel::encode_uncached(std::string_view word, std::vector<int32_t>* out) const {
  if (opt_.ignore_merges) {
    if (const int32_t id = token_to_id(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<int32_t> syms;
  syms.reserve(word.size());
  const bool affixes = !opt_.continuing_subword_prefix.empty() || !opt_.end_of_word_suffix.empty();
  bool last_unk = false;
  std::string buf;
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::min(char_len(static_cast<unsigned char>(word[i])), word.size() - i);
    const std::string_view ch = word.substr(i, len);
    int32_t id;
    if (affixes) {
      buf.clear();
      if (i > 0) buf += opt_.continuing_subword_prefix;
      buf += ch;
      if (i + len == word.size()) buf += opt_.end_of_word_suffix;
      id = token_to_id(buf);
    } else {
      id = token_to_id(ch);
    }
    i += len;
    if (id >= 0) {
      syms.push_back(id);
      last_unk = false;
      continue;
    }
    if (opt_.byte_fallback &&
        std::all_of(ch.begin(), ch.end(), [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
      for (char c : ch) syms.push_back(byte_ids_[static_cast<unsigned char>(c)]);
      last_unk = false;
      continue;
    }
    // The tokenizers library drops the character when there is no unk token.
    if (opt_.unk_id < 0) continue;
    if (!(opt_.fuse_unk && last_unk)) syms.push_back(opt_.unk_id);
    last_unk = true;
  }
  merge(syms);
  out->insert(out->end(), syms.begin(), syms.end());
}

void BpeModel::merge(std::vector<int32_t>& syms) const {
  const size_t n = syms.size();
  if (n < 2 || merges_.empty()) return;
  auto find = [&](int32_t a, int32_t b) { return merges_.find(pair_key(a, b)); };
  if (n <= kRescanMax) {
    while (syms.size() > 1) {
      int32_t best_rank = INT32_MAX, best_id = -1;
      size_t best_pos = 0;
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        if (const auto* m = find(syms[i], syms[i + 1]); m && m->first < best_rank) {
          best_rank = m->first;
          best_id = m->second;
          best_pos = i;
        }
      }
      if (best_id < 0) break;
      syms[best_pos] = best_id;
      syms.erase(syms.begin() + std::ptrdiff_t(best_pos) + 1);
    }
    return;
  }
  // Doubly linked symbols and a heap of (rank, position) candidates, lowest
  // rank first and leftmost among equals; a candidate is stale when its
  // symbols changed since it was pushed.
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = int32_t(i) - 1;
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
  }
  struct Cand {
    int32_t rank, pos, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[size_t(pos)] < 0) return;
    const int32_t r = next[size_t(pos)];
    if (const auto* m = find(syms[size_t(pos)], syms[size_t(r)])) heap.push({m->first, pos, r, m->second});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const auto p = size_t(c.pos);
    if (!alive[p] || next[p] != c.right) continue;
    const auto* m = find(syms[p], syms[size_t(c.right)]);
    if (!m || m->second != c.merged || m->first != c.rank) continue;
    syms[p] = c.merged;
    const auto r = size_t(c.right);
    alive[r] = false;
    next[p] = next[r];
    if (next[r] >= 0) prev[size_t(next[r])] = c.pos;
    push(prev[p]);
    push(c.pos);
  }
  size_t k = 0;
  for (int32_t i = 0; i >= 0; i = next[size_t(i)]) syms[k++] = syms[size_t(i)];
  syms.resize(k);
}

}  // namespace rinfer

#include "tokenizer/added_vocabulary.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode/unicode.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace {

// Start of the last character of s[0, end).
size_t prev_char(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

uint32_t char_at(std::string_view s, size_t i) {
  size_t len = 0;
  return utf8::decode_at(s, i, &len);
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view s, int32_t tok) {
  int32_t node = 0;
  first[static_cast<unsigned char>(s[0])] = true;
  for (char c : s) {
    const uint64_t key = (uint64_t(node) << 8) | static_cast<unsigned char>(c);
    auto it = edges.find(key);
    if (it == edges.end()) {
      token.push_back(-1);
      it = edges.emplace(key, int32_t(token.size() - 1)).first;
    }
    node = it->second;
  }
  if (token[size_t(node)] < 0) token[size_t(node)] = tok;
}

int32_t AddedVocabulary::Trie::child(int32_t node, unsigned char b) const {
  auto it = edges.find((uint64_t(node) << 8) | b);
  return it == edges.end() ? -1 : it->second;
}

void AddedVocabulary::add(const AddedToken& t) {
  if (t.content.empty()) return;
  if (auto it = by_content_.find(t.content); it != by_content_.end()) {
    if (t.special) tokens_[it->second].special = true;
    return;
  }
  const size_t idx = tokens_.size();
  tokens_.push_back(t);
  by_content_[t.content] = idx;
  by_id_.try_emplace(t.id, idx);
  max_id_ = std::max(max_id_, t.id);
  (t.normalized ? normalized_ : raw_).insert(t.content, int32_t(idx));
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::cut(const Trie& trie, std::string_view text, bool parse_special, bool at_start,
                          std::vector<Segment>* out) const {
  size_t piece_start = 0;  // start of the text not yet emitted
  auto emit_text = [&](size_t b, size_t e) {
    if (e > b) out->push_back({std::string(text.substr(b, e - b)), -1, at_start && b == 0});
  };
  size_t i = 0;
  while (i < text.size()) {
    if (!trie.first[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    // The longest token starting at i.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = trie.child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      const int32_t tok = trie.token[size_t(node)];
      if (tok >= 0 && (parse_special || !tokens_[size_t(tok)].special)) {
        best = tok;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[size_t(best)];
    size_t start = i, stop = best_end;
    if (t.single_word) {
      const bool word_before = start > 0 && unicode::is_alphanumeric(char_at(text, prev_char(text, start)));
      const bool word_after = stop < text.size() && unicode::is_alphanumeric(char_at(text, stop));
      if (word_before || word_after) {
        i = stop;  // the library's scan resumes after the rejected match
        continue;
      }
    }
    auto space = [&](uint32_t cp) {
      return t.strip_ascii ? cp < 0x80 && std::isspace(int(cp)) : unicode::is_whitespace(cp);
    };
    if (t.lstrip) {
      while (start > piece_start && space(char_at(text, prev_char(text, start)))) start = prev_char(text, start);
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t len = 0;
        if (!space(utf8::decode_at(text, stop, &len))) break;
        stop += len;
      }
    }
    emit_text(piece_start, start);
    out->push_back({t.content, t.id, false});
    piece_start = stop;
    i = stop;
  }
  emit_text(piece_start, text.size());
}

std::vector<AddedVocabulary::Segment> AddedVocabulary::split(std::string_view text, const Normalizer* normalizer,
                                                             bool parse_special) const {
  std::vector<Segment> raw;
  cut(raw_, text, parse_special, true, &raw);
  std::vector<Segment> out;
  out.reserve(raw.size());
  for (Segment& s : raw) {
    if (s.id >= 0) {
      out.push_back(std::move(s));
      continue;
    }
    if (normalizer) normalizer->normalize(s.text);
    if (!s.text.empty()) cut(normalized_, s.text, parse_special, s.at_start, &out);
  }
  return out;
}

}  // namespace rinfer

#include "tokenizer/wordpiece_model.h"

#include <algorithm>

#include "core/error.h"

namespace rinfer {

WordPieceModel::WordPieceModel(TokenMap vocab, const std::string& unk_token, std::string prefix, size_t max_chars)
    : vocab_(std::move(vocab)), prefix_(std::move(prefix)), max_chars_(max_chars) {
  int32_t n = 0;
  for (const auto& [tok, id] : vocab_) {
    RINFER_CHECK(id >= 0 && id < (1 << 24), "tokenizer: token \"", tok, "\" has implausible id ", id);
    n = std::max(n, id + 1);
    max_token_bytes_ = std::max(max_token_bytes_, tok.size());
  }
  tokens_.assign(size_t(n), std::string());
  present_.assign(size_t(n), false);
  for (const auto& [tok, id] : vocab_) {
    tokens_[size_t(id)] = tok;
    present_[size_t(id)] = true;
  }
  unk_id_ = token_to_id(unk_token);
  RINFER_CHECK(unk_id_ >= 0, "tokenizer: WordPiece unk_token \"", unk_token, "\" is not in the vocabulary");
}

int32_t WordPieceModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* WordPieceModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= int32_t(tokens_.size()) || !present_[size_t(id)]) return nullptr;
  return &tokens_[size_t(id)];
}

void WordPieceModel::encode(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  size_t chars = 0;
  for (char c : word) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  if (chars > max_chars_) {
    out->push_back(unk_id_);
    return;
  }
  const size_t mark = out->size();
  std::string buf;
  for (size_t start = 0; start < word.size();) {
    // Longest match first; no token is longer than max_token_bytes_.
    size_t end = std::min(word.size(), start + max_token_bytes_);
    while (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
    int32_t id = -1;
    for (; end > start; --end) {
      if (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) continue;  // inside a character
      if (start == 0) {
        id = token_to_id(word.substr(0, end));
      } else {
        buf.assign(prefix_);
        buf.append(word.substr(start, end - start));
        id = token_to_id(buf);
      }
      if (id >= 0) break;
    }
    if (id < 0) {  // the whole word is unknown
      out->resize(mark);
      out->push_back(unk_id_);
      return;
    }
    out->push_back(id);
    start = end;
  }
}

}  // namespace rinfer

#include "tokenizer/unigram_model.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace rinfer {

namespace {
constexpr double kUnkPenalty = 10.0;
size_t char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }
}  // namespace

UnigramModel::UnigramModel(std::vector<std::pair<std::string, double>> pieces, int32_t unk_id, bool byte_fallback)
    : pieces_(std::move(pieces)), unk_id_(unk_id), byte_fallback_(byte_fallback) {
  RINFER_CHECK(!pieces_.empty(), "tokenizer: Unigram vocabulary is empty");
  RINFER_CHECK(pieces_.size() < (1u << 24), "tokenizer: Unigram vocabulary is implausibly large");
  RINFER_CHECK(unk_id_ < int32_t(pieces_.size()), "tokenizer: Unigram unk_id ", unk_id_, " is outside the vocabulary");
  min_score_ = std::numeric_limits<double>::infinity();
  vocab_.reserve(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const auto& [piece, score] = pieces_[id];
    min_score_ = std::min(min_score_, score);
    vocab_.try_emplace(piece, int32_t(id));  // a repeated piece keeps its first id
    int32_t node = 0;
    for (unsigned char b : piece) {
      const uint64_t key = uint64_t(node) << 8 | b;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, int32_t(node_token_.size())).first;
        node_token_.push_back(-1);
      }
      node = it->second;
    }
    if (node > 0 && node_token_[size_t(node)] < 0) node_token_[size_t(node)] = int32_t(id);
  }
}

int32_t UnigramModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* UnigramModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= int32_t(pieces_.size())) return nullptr;
  return &pieces_[size_t(id)].first;
}

void UnigramModel::encode(std::string_view s, std::vector<int32_t>* out) const {
  if (s.empty()) return;
  // best[e]: the best segmentation of s[0, e): its score, where its last
  // piece starts, and that piece's id.
  struct Node {
    double score = 0;
    int64_t start = -1;
    int32_t id = -1;
  };
  const size_t n = s.size();
  std::vector<Node> best(n + 1);
  best[0].start = 0;
  const double unk_score = min_score_ - kUnkPenalty;
  for (size_t start = 0; start < n;) {
    const double base = best[start].score;
    const size_t mblen = std::min(char_len(static_cast<unsigned char>(s[start])), n - start);
    bool has_single = false;
    int32_t node = 0;
    for (size_t i = start; i < n; ++i) {
      auto it = edges_.find(uint64_t(node) << 8 | static_cast<unsigned char>(s[i]));
      if (it == edges_.end()) break;
      node = it->second;
      const int32_t id = node_token_[size_t(node)];
      if (id < 0) continue;
      const size_t end = i + 1;
      const double cand = base + pieces_[size_t(id)].second;
      Node& t = best[end];
      if (t.start < 0 || cand > t.score) t = {cand, int64_t(start), id};
      if (end - start == mblen) has_single = true;
    }
    if (!has_single) {
      RINFER_CHECK(unk_id_ >= 0, "tokenizer: Unigram model has no unk_id for the unknown character in \"",
                   std::string(s.substr(start, mblen)), "\"");
      Node& t = best[start + mblen];
      const double cand = base + unk_score;
      if (t.start < 0 || cand > t.score) t = {cand, int64_t(start), unk_id_};
    }
    start += mblen;
  }
  // Back from the end; adjacent unknown characters fuse into one piece.
  struct Piece {
    size_t b, e;
    int32_t id;
  };
  std::vector<Piece> path;
  for (size_t e = n; e > 0;) {
    const Node& nd = best[e];
    const auto b = size_t(nd.start);
    if (nd.id == unk_id_ && !path.empty() && path.back().id == unk_id_)
      path.back().b = b;
    else
      path.push_back({b, e, nd.id});
    e = b;
  }
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    if (it->id != unk_id_) {
      out->push_back(it->id);
      continue;
    }
    // The library looks the unknown text up again: it is a piece only if it
    // is one (possible for a fused run), else bytes or unk.
    const std::string_view text = s.substr(it->b, it->e - it->b);
    if (const int32_t id = token_to_id(text); id >= 0) {
      out->push_back(id);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (unsigned char c : text) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", c);
        const int32_t id = token_to_id(name);
        if (id < 0) break;
        bytes.push_back(id);
      }
      if (bytes.size() == text.size()) {
        out->insert(out->end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    out->push_back(unk_id_);
  }
}

}  // namespace rinfer

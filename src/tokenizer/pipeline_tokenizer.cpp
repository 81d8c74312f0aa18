#include "tokenizer/pipeline_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace {

class PipelineTokenizer final : public Tokenizer {
 public:
  explicit PipelineTokenizer(TokenizerPipeline p) : p_(std::move(p)) {
    vocab_size_ = std::max(p_.model->size(), p_.added.max_id() + 1);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    return run(text, add_special, !p_.split_special_tokens);
  }
  std::vector<int32_t> encode_no_parse_special(std::string_view text, bool add_special) const override {
    return run(text, add_special, false);
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string id_to_piece(int32_t id) const override {
    check_id(id);
    if (const AddedToken* t = p_.added.by_id(id)) return t->content;
    return *p_.model->id_to_token(id);
  }
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return p_.bos; }
  int32_t eos_id() const override { return p_.eos; }
  bool is_special(int32_t id) const override {
    const AddedToken* t = p_.added.by_id(id);
    return t && t->special;
  }
  const std::vector<int32_t>& eos_ids() const override { return p_.eos_ids; }
  size_t unstable_suffix(std::string_view text) const override;

 private:
  std::vector<int32_t> run(std::string_view text, bool add_special, bool parse_special) const;
  void check_id(int32_t id) const {
    RINFER_CHECK(id >= 0 && id < vocab_size_, "token id ", id, " is out of range (vocab size ", vocab_size_, ")");
    RINFER_CHECK(p_.added.by_id(id) || p_.model->id_to_token(id), "token id ", id,
                 " has no token in the tokenizer (vocab size ", vocab_size_, ")");
  }

  TokenizerPipeline p_;
  int32_t vocab_size_ = 0;
};

std::vector<int32_t> PipelineTokenizer::run(std::string_view text, bool add_special, bool parse_special) const {
  // Python strings cannot hold invalid UTF-8, so transformers never sees
  // it; rinfer rejects it rather than guessing.
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos)
    fail("prompt is not valid UTF-8 (byte offset ", bad, ")");
  std::vector<int32_t> ids;
  if (add_special) ids = p_.post.prefix;
  PreTokenized pt;
  for (auto& seg : p_.added.split(text, p_.normalizer.get(), parse_special)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    pt.pieces.clear();
    pt.pieces.push_back(std::move(seg.text));
    pt.first_at_start = seg.at_start;
    if (p_.pre_tokenizer) p_.pre_tokenizer->apply(pt);
    for (const std::string& piece : pt.pieces) p_.model->encode(piece, &ids);
  }
  if (add_special) ids.insert(ids.end(), p_.post.suffix.begin(), p_.post.suffix.end());
  return ids;
}

std::string PipelineTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    check_id(id);
    if (const AddedToken* t = p_.added.by_id(id)) {
      if (skip_special && t->special) continue;
      tokens.push_back(t->content);
    } else {
      tokens.push_back(*p_.model->id_to_token(id));
    }
  }
  std::string text;
  if (p_.decoder) {
    p_.decoder->decode_chain(tokens);
    for (const auto& t : tokens) text += t;
  } else {
    // The tokenizers library joins with spaces when there is no decoder.
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  if (p_.clean_up_tokenization_spaces) text = clean_up_tokenization(std::move(text));
  return text;
}

// The clean-up rules, in transformers' order.
constexpr std::pair<std::string_view, std::string_view> kCleanUp[] = {
    {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};

// With clean-up, a text ending in a proper prefix of a rule's pattern
// (" ", " '", " n", ...) can still change when more text follows.
size_t PipelineTokenizer::unstable_suffix(std::string_view text) const {
  if (!p_.clean_up_tokenization_spaces) return 0;
  size_t longest = 0;
  for (const auto& [from, to] : kCleanUp)
    for (size_t n = from.size() - 1; n > longest; --n)
      if (text.ends_with(from.substr(0, n))) {
        longest = n;
        break;
      }
  return longest;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return s;
  std::string out;
  size_t i = 0;
  for (size_t j; (j = s.find(from, i)) != std::string::npos; i = j + from.size()) {
    out.append(s, i, j - i);
    out.append(to);
  }
  out.append(s, i);
  return out;
}

}  // namespace

std::string clean_up_tokenization(std::string t) {
  for (const auto& [from, to] : kCleanUp) t = replace_all(std::move(t), from, to);
  return t;
}

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(TokenizerPipeline p) {
  RINFER_ASSERT(p.model != nullptr);
  return std::make_unique<PipelineTokenizer>(std::move(p));
}

}  // namespace rinfer

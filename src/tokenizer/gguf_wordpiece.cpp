#include "tokenizer/gguf_wordpiece.h"

#include <algorithm>

#include "tokenizer/unicode/unicode.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace {

bool is_chinese_char(uint32_t cp) {
  // 0x2B920 (not 0x2B820) as in the tokenizers library, which llama.cpp copies.
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// llm_tokenizer_wpm_session::preprocess: normalizes and cuts the text into
// words (whitespace ends a word; punctuation, ASCII symbols and CJK
// ideographs are words of their own).
class LlamaCppWordPiecePreTokenizer final : public PreTokenizer {
 public:
  LlamaCppWordPiecePreTokenizer(bool lowercase, bool strip_accents) : lower_(lowercase), strip_(strip_accents) {}
  void apply(PreTokenized& pt) const override {
    std::vector<std::string> out;
    for (const std::string& text : pt.pieces) {
      std::string word;
      auto finish = [&] {
        if (!word.empty()) out.push_back(std::move(word));
        word.clear();
      };
      for (size_t i = 0; i < text.size();) {
        size_t len = 0;
        uint32_t cp = utf8::decode_at(text, i, &len);
        i += len;
        if (strip_) cp = unicode::nfd_first(cp);
        if (unicode::is_whitespace(cp)) {
          finish();
          continue;
        }
        const unicode::Category cat = unicode::category(cp);
        if (cp == 0 || cp == 0xFFFD || cat == unicode::Category::Other) continue;
        if (strip_ && cat == unicode::Category::Mark) continue;
        if (lower_) cp = unicode::lower_first(cp);
        if (cat == unicode::Category::Punctuation || (cp < 0x7F && cat == unicode::Category::Symbol) ||
            is_chinese_char(cp)) {
          finish();
          unicode::append_utf8(cp, &word);
          finish();
        } else {
          unicode::append_utf8(cp, &word);
        }
      }
      finish();
    }
    pt.pieces = std::move(out);
  }

 private:
  bool lower_, strip_;
};

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581

}  // namespace

std::unique_ptr<PreTokenizer> make_llamacpp_wordpiece_pre_tokenizer(bool lowercase, bool strip_accents) {
  return std::make_unique<LlamaCppWordPiecePreTokenizer>(lowercase, strip_accents);
}

LlamaCppWordPiece::LlamaCppWordPiece(const std::vector<std::string>& gguf_tokens, TokenMap pieces,
                                     const std::string& unk_token)
    : pieces_(std::move(pieces), unk_token, "##", SIZE_MAX), unk_id_(pieces_.token_to_id(unk_token)) {
  match_.reserve(gguf_tokens.size());
  for (size_t id = 0; id < gguf_tokens.size(); ++id) {
    match_.try_emplace(gguf_tokens[id], int32_t(id));
    max_token_bytes_ = std::max(max_token_bytes_, gguf_tokens[id].size());
  }
}

void LlamaCppWordPiece::encode(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  std::string w(kWordStart);
  w += word;
  const size_t mark = out->size();
  for (size_t i = 0; i < w.size();) {
    int32_t id = -1;
    size_t end = std::min(w.size(), i + max_token_bytes_);
    for (; end > i; --end) {
      auto it = match_.find(std::string_view(w).substr(i, end - i));
      if (it != match_.end()) {
        id = it->second;
        break;
      }
    }
    if (id < 0) {
      out->resize(mark);
      out->push_back(unk_id_);
      return;
    }
    out->push_back(id);
    i = end;
  }
}

}  // namespace rinfer

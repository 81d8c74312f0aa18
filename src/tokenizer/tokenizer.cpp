#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "tokenizer/hf_config.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& dir) {
  std::error_code ec;
  const fs::path p(dir);
  RINFER_CHECK(fs::exists(p, ec), "tokenizer: no such file or directory: ", dir);
  fs::path model_file, config_dir;
  if (fs::is_directory(p, ec)) {
    model_file = p / "tokenizer.model";
    config_dir = p;
    RINFER_CHECK(fs::is_regular_file(model_file, ec), "no tokenizer.model in ", dir,
                 "; rinfer reads SentencePiece tokenizer.model for now");
  } else {
    model_file = p;
    config_dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  }
  return load_sentencepiece_tokenizer(model_file, read_hf_tokenizer_config(config_dir));
}

namespace {

// Shrink the window once it holds this many ids, keeping at least
// kContextIds of them as context.
constexpr size_t kWindowMax = 64;
constexpr size_t kContextIds = 8;

// How much of `text` no later id can change: it ends before an unfinished
// UTF-8 sequence, and before up to three trailing U+FFFD, which is what
// SentencePiece writes for the bytes of a byte-fallback character that is
// still incomplete (a UTF-8 character has at most three bytes after its
// first, so an older U+FFFD is final).
size_t stable_prefix(std::string_view text) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t end = utf8::complete_prefix(text);
  for (int k = 0; k < 3 && text.substr(0, end).ends_with(kReplacement); ++k) end -= kReplacement.size();
  return end;
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special)
    : tok_(tok), skip_special_(skip_special) {}

std::string StreamingDetokenizer::decode_window() const { return tok_.decode(ids_, skip_special_); }

std::string StreamingDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::string text;
  try {
    text = decode_window();
  } catch (...) {
    ids_.pop_back();  // a bad id leaves the stream as it was
    throw;
  }
  // Decoding is prefix-stable apart from the held-back tail, so the text
  // already emitted is still the start of `text`.
  RINFER_ASSERT(text.size() >= emitted_bytes_);
  const size_t stable = std::max(stable_prefix(text), emitted_bytes_);
  std::string out = text.substr(emitted_bytes_, stable - emitted_bytes_);
  emitted_bytes_ = stable;
  if (ids_.size() > kWindowMax && stable == text.size()) shrink_window(text);
  return out;
}

void StreamingDetokenizer::shrink_window(const std::string& text) {
  if (text.empty()) {
    // Ids that decode to nothing (skipped specials, a lone "▁" at the very
    // start) leave the decoder where it began, so they can simply go.
    ids_.clear();
    emitted_bytes_ = 0;
    return;
  }
  // The context must decode to some text: SentencePiece drops the leading
  // space of pieces only while its output is still empty, and that must not
  // happen to ids that are not at the start of the stream. Its text must also
  // be final, so that it stays the start of every later window's text.
  for (size_t keep = kContextIds; keep < ids_.size(); keep *= 2) {
    std::vector<int32_t> ctx(ids_.end() - std::ptrdiff_t(keep), ids_.end());
    std::string t = tok_.decode(ctx, skip_special_);
    if (!t.empty() && stable_prefix(t) == t.size()) {
      ids_ = std::move(ctx);
      emitted_bytes_ = t.size();
      return;
    }
  }
}

std::string StreamingDetokenizer::flush() {
  std::string text = decode_window();  // cannot throw: push checked every id
  std::string out = text.substr(std::min(emitted_bytes_, text.size()));
  ids_.clear();
  emitted_bytes_ = 0;
  return out;
}

}  // namespace rinfer

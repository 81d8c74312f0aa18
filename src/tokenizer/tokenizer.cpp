#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_config.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tiktoken.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& dir) {
  std::error_code ec;
  const fs::path p(dir);
  RINFER_CHECK(fs::exists(p, ec), "tokenizer: no such file or directory: ", dir);
  fs::path file, config_dir;
  if (fs::is_directory(p, ec)) {
    config_dir = p;
    // AutoTokenizer's choice: the fast tokenizer (tokenizer.json) when there
    // is one, else the slow tokenizer's vocabulary: Qwen-1's qwen.tiktoken,
    // or tokenizer.model (SentencePiece, or tiktoken for GLM-4).
    for (const char* name : {"tokenizer.json", "qwen.tiktoken", "tokenizer.model"}) {
      if (fs::is_regular_file(p / name, ec)) {
        file = p / name;
        break;
      }
    }
    RINFER_CHECK(!file.empty(), "tokenizer: no tokenizer.json, qwen.tiktoken or tokenizer.model in ", dir);
  } else {
    file = p;
    config_dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  }
  const std::string ext = file.extension().string();
  if (ext == ".gguf") return load_gguf_tokenizer(file);
  const HfTokenizerConfig cfg = read_hf_tokenizer_config(config_dir);
  if (ext == ".json") return load_hf_tokenizer_json(file, cfg);
  // By content: a tiktoken file is text lines, a SentencePiece model a protobuf.
  if (ext == ".tiktoken" || is_tiktoken_file(file)) return load_tiktoken_tokenizer(file, cfg);
  return load_sentencepiece_tokenizer(file, cfg);
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
  // Decoding is prefix-stable apart from the held-back tail, except while a
  // run of byte-fallback tokens is incomplete: the tokenizers library then
  // turns the whole run, characters already emitted included, into U+FFFD.
  // Wait until the emitted text is the start of the decode again.
  if (text.compare(0, emitted_.size(), emitted_) != 0) return {};
  const size_t final_end = std::min(stable_prefix(text), text.size() - tok_.unstable_suffix(text));
  const size_t stable = std::max(final_end, emitted_.size());
  std::string out = text.substr(emitted_.size(), stable - emitted_.size());
  emitted_ = text.substr(0, stable);
  if (ids_.size() > kWindowMax && stable == text.size()) shrink_window(text);
  return out;
}

void StreamingDetokenizer::shrink_window(const std::string& text) {
  if (text.empty()) {
    // Ids that decode to nothing (skipped specials, a lone "▁" at the very
    // start) leave the decoder where it began, so they can simply go.
    ids_.clear();
    emitted_.clear();
    return;
  }
  // The context must decode to some text: SentencePiece drops the leading
  // space of pieces only while its output is still empty, and that must not
  // happen to ids that are not at the start of the stream. Its text must also
  // be final, so that it stays the start of every later window's text.
  for (size_t keep = kContextIds; keep < ids_.size(); keep *= 2) {
    std::vector<int32_t> ctx(ids_.end() - std::ptrdiff_t(keep), ids_.end());
    std::string t = tok_.decode(ctx, skip_special_);
    if (!t.empty() && stable_prefix(t) == t.size() && tok_.unstable_suffix(t) == 0) {
      ids_ = std::move(ctx);
      emitted_ = std::move(t);
      return;
    }
  }
}

std::string StreamingDetokenizer::flush() {
  std::string text = decode_window();  // cannot throw: push checked every id
  // Normally the emitted text is a prefix of the final text; if the stream
  // ended inside a byte-fallback run it is not, and only what differs can
  // still be written.
  size_t common = 0;
  while (common < text.size() && common < emitted_.size() && text[common] == emitted_[common]) ++common;
  std::string out = text.substr(common);
  ids_.clear();
  emitted_.clear();
  return out;
}

}  // namespace rinfer

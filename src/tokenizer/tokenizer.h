#pragma once
// Tokenizer: text <-> token ids, matching Hugging Face transformers.
// Back-ends: Hugging Face tokenizer.json (BPE, byte-level or SentencePiece
// style, WordPiece, Unigram; pipeline_tokenizer.h), SentencePiece
// tokenizer.model, tiktoken vocabularies (Qwen-1, GLM-4), and GGUF
// vocabularies (tokenizer.ggml.*), each with the BOS/EOS rules of
// tokenizer_config.json.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rinfer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads the tokenizer found in a model directory: tokenizer.json when
  // present (transformers' AutoTokenizer prefers the fast tokenizer), else
  // qwen.tiktoken, else tokenizer.model (SentencePiece, or a tiktoken file
  // as GLM-4's), plus tokenizer_config.json / special_tokens_map.json.
  // `dir` may also name a tokenizer.json, tokenizer.model, tiktoken or .gguf file; the
  // JSON files next to it are then read the same way. Throws rinfer::Error
  // with a one-line reason when none is usable.
  static std::unique_ptr<Tokenizer> load(const std::string& dir);

  // add_special: as transformers' add_special_tokens=True (BOS if the
  // config's add_bos_token, default true for LlamaTokenizer; EOS if
  // add_eos_token). Added/special token strings in the text (e.g. "<s>") are
  // matched as those tokens, as transformers does. Invalid UTF-8 input
  // throws rinfer::Error.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  // As encode, but special-token text ("<s>", "<|im_start|>") stays text
  // (transformers' split_special_tokens=True, llama.cpp's
  // parse_special=false). Non-special added tokens are still matched.
  virtual std::vector<int32_t> encode_no_parse_special(std::string_view text, bool add_special) const = 0;
  // As transformers' decode(ids, skip_special_tokens=skip_special). Kept
  // special and added tokens are written as their text, and the piece after
  // one keeps its leading space (as LlamaTokenizerFast and llama.cpp do; the
  // slow tokenizer's legacy spacing there is not copied, see the back-end).
  // Ids outside [0, vocab_size()) throw rinfer::Error.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = true) const = 0;
  virtual std::string id_to_piece(int32_t id) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;  // -1 if none
  virtual bool is_special(int32_t id) const = 0;
  // How many bytes at the end of a decoded text later ids may still change
  // (beyond unfinished UTF-8, which the streaming detokenizer handles):
  // e.g. a trailing " " that clean_up_tokenization_spaces would drop before
  // a ".". The streaming detokenizer holds them back.
  virtual size_t unstable_suffix(std::string_view text) const { return 0; }

  // Every id that ends generation: eos_id() first (when there is one), then
  // the other ids listed as eos_token_id in generation_config.json or
  // config.json (an int or a list), without duplicates. They may lie outside
  // the vocabulary when the model's embedding is padded.
  virtual const std::vector<int32_t>& eos_ids() const = 0;
  bool is_eos(int32_t id) const {
    const auto& e = eos_ids();
    return std::find(e.begin(), e.end(), id) != e.end();
  }
};

// Turns a stream of generated ids into text pieces as soon as they form
// valid UTF-8: never a broken character, never a lost byte. The text of
// push(a) + push(b) + ... + flush() equals tokenizer.decode({a, b, ...}).
// Each push decodes only a short window of recent ids, so a long generation
// costs O(n). flush() ends the stream; the object then starts a new one.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special = true);
  std::string push(int32_t id);
  std::string flush();

 private:
  std::string decode_window() const;
  void shrink_window(const std::string& text);

  const Tokenizer& tok_;
  bool skip_special_;
  // The window: ids whose text is partly or wholly emitted. Its first ids are
  // context only (their text was emitted earlier); decoding them again gives
  // later ids the same leading-space and byte-fallback handling they get in a
  // decode of the whole stream.
  std::vector<int32_t> ids_;
  // The start of decode(ids_) that was already emitted (context included).
  std::string emitted_;
};

}  // namespace rinfer

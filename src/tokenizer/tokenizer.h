#pragma once
// Tokenizer: text <-> token ids, matching Hugging Face transformers.
// For now: SentencePiece `tokenizer.model` (LLaMA-family) with the BOS/EOS
// rules of tokenizer_config.json. The interface is what the runtime uses, so
// tokenizer.json / tiktoken back-ends plug in behind it later.
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

  // Loads the tokenizer found in a model directory (tokenizer.model plus
  // tokenizer_config.json / special_tokens_map.json when present). Throws
  // rinfer::Error with a one-line reason when none is usable.
  static std::unique_ptr<Tokenizer> load(const std::string& dir);

  // add_special: as transformers' add_special_tokens=True (BOS if the
  // config's add_bos_token, default true for LlamaTokenizer; EOS if
  // add_eos_token). Invalid UTF-8 input throws rinfer::Error.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  // As transformers' decode(ids, skip_special_tokens=skip_special).
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = true) const = 0;
  virtual std::string id_to_piece(int32_t id) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;  // -1 if none
  virtual bool is_special(int32_t id) const = 0;
};

// Turns a stream of generated ids into text pieces as soon as they form
// valid UTF-8: never a broken character, never a lost byte. The text of
// push(a) + push(b) + ... + flush() equals tokenizer.decode({a, b, ...}).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special = true);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
};

}  // namespace rinfer

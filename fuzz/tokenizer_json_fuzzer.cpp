// tokenizer.json: load_hf_tokenizer_json_text (the SAX reader of the model's
// vocab and merges, normalizers, pre-tokenizers, BPE / WordPiece / Unigram
// models, decoders, post-processors, added tokens), then the tokenizer run
// over a text. JSON never holds a NUL byte: bytes after the first NUL are
// the text to encode (else a fixed sample).
#include <cstring>

#include "fuzz_util.h"
#include "tokenizer/hf_tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = rinfer::fuzz::as_text(data, size);
  const size_t nul = in.find('\0');
  const std::string_view json = in.substr(0, nul);
  const std::string_view text =
      nul == std::string_view::npos ? std::string_view("Hello world! <s>[INST] 123 x\xc3\xa9 \xe4\xbd\xa0</s>")
                                    : in.substr(nul + 1);
  static const rinfer::HfTokenizerConfig plain;
  static const rinfer::HfTokenizerConfig llama = [] {
    rinfer::HfTokenizerConfig c;
    c.tokenizer_class = "LlamaTokenizerFast";
    c.add_eos_token = true;
    c.bos.present = true;
    c.bos.token = rinfer::AddedTokenSpec{"<s>", false, false, false, true};
    return c;
  }();
  // The config transformers' AutoTokenizer layers on top: none, or LLaMA's.
  const auto& cfg = (size % 2) ? llama : plain;
  rinfer::fuzz::expect_rejections([&] {
    auto tok = rinfer::load_hf_tokenizer_json_text(json, "fuzz/tokenizer.json", cfg);
    rinfer::fuzz::exercise_tokenizer(*tok, text);
  });
  return 0;
}

// The helper of gen_llamacpp_tokenizer_vectors.py: tokenizes strings with
// llama.cpp's own tokenizer (a vocab-only load of a .gguf), as llama.cpp's
// test-tokenizer-0 does (add_special = false).
//   llamacpp_tokenize VOCAB.gguf STRINGS.hex PARSE_SPECIAL(0|1)
// STRINGS.hex: one string a line, its UTF-8 bytes as hex. Writes one line of
// ids per string to stdout (each id preceded by a space).
// Build against a llama.cpp tree (see the generator's header).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"

static std::string unhex(const std::string& h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) s.push_back(char(std::stoi(h.substr(i, 2), nullptr, 16)));
  return s;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf STRINGS.hex PARSE_SPECIAL(0|1)\n", argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const bool parse_special = std::string(argv[3]) == "1";
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    const std::string text = unhex(line);
    std::vector<llama_token> ids(text.size() * 4 + 16);
    auto run = [&] {
      return llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), false,
                            parse_special);
    };
    int n = run();
    if (n < 0) {
      ids.resize(size_t(-n));
      n = run();
    }
    std::string out;
    for (int i = 0; i < n; ++i) out += " " + std::to_string(ids[size_t(i)]);
    std::printf("%s\n", out.c_str());
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}

// GGUF vocabularies: read_gguf_metadata (the key/value reader) and
// load_gguf_tokenizer (llama / gpt2 / bert vocabularies from
// tokenizer.ggml.*), then the tokenizer run over a few texts.
//
// The GGUF reader takes only a path (src/tokenizer/gguf_vocab.h); the input
// goes to an in-memory file (memfd) read back through /proc/self/fd, so no
// disk is touched per execution.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "tokenizer/gguf_vocab.h"

namespace {

const std::string& memfd_path(const uint8_t* data, size_t size) {
  static int fd = -1;
  static std::string path;
  if (fd < 0) {
    fd = memfd_create("fuzz.gguf", 0);
    if (fd < 0) std::abort();
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  if (ftruncate(fd, 0) != 0) std::abort();
  size_t at = 0;
  while (at < size) {
    const ssize_t n = pwrite(fd, data + at, size - at, off_t(at));
    if (n <= 0) std::abort();
    at += size_t(n);
  }
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = memfd_path(data, size);
  rinfer::fuzz::expect_rejections([&] { rinfer::read_gguf_metadata(path); });
  rinfer::fuzz::expect_rejections([&] {
    auto tok = rinfer::load_gguf_tokenizer(path);
    for (const char* text : {"Hello world! 123 <s> </s>", " \xc3\xa9t\xc3\xa9\n\n\t x", "\xe4\xbd\xa0\xe5\xa5\xbd"})
      rinfer::fuzz::exercise_tokenizer(*tok, text);
  });
  return 0;
}

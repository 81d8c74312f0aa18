// The fuzz targets without libFuzzer: feeds files to a target's
// LLVMFuzzerTestOneInput, so the committed regression inputs and the seed
// corpus replay as ordinary tests in any build (gcc, no sanitizer needed).
//   fuzz_replay TARGET PATH...   (a PATH that is a folder: every file in it)
// Each target's source is compiled with LLVMFuzzerTestOneInput renamed to
// rinfer_fuzz_<target> (fuzz/CMakeLists.txt), so one binary holds them all.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define RINFER_FUZZ_TARGETS(X) X(safetensors) X(gguf) X(config) X(tokenizer_json) X(jinja) X(openai)

#define RINFER_DECLARE(name) extern "C" int rinfer_fuzz_##name(const uint8_t* data, size_t size);
RINFER_FUZZ_TARGETS(RINFER_DECLARE)
#undef RINFER_DECLARE

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  using Fn = int (*)(const uint8_t*, size_t);
  Fn fn = nullptr;
  const std::string target = argc > 1 ? argv[1] : "";
#define RINFER_PICK(name) \
  if (target == #name) fn = rinfer_fuzz_##name;
  RINFER_FUZZ_TARGETS(RINFER_PICK)
#undef RINFER_PICK
  if (!fn) {
    std::fprintf(stderr, "usage: %s TARGET PATH...  (TARGET: safetensors gguf config tokenizer_json jinja openai)\n",
                 argv[0]);
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "fuzz_replay: %s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    // A crash or an escaping exception ends the process: the last line names the input.
    std::fprintf(stderr, "%s\n", f.string().c_str());
    // A copy of exactly the input's size, as libFuzzer passes it.
    std::vector<uint8_t> buf(bytes.begin(), bytes.end());
    fn(buf.data(), buf.size());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("fuzz_replay %s: %zu inputs in %.2f s, no findings\n", target.c_str(), files.size(), s);
  return 0;
}

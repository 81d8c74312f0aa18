// safetensors: the header parser and its validation (io::SafetensorsFile,
// the in-memory form of what every checkpoint and rinfer model file goes
// through), then every tensor's bytes touched through its view.
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rinfer::fuzz::expect_rejections([&] {
    rinfer::io::SafetensorsFile f("fuzz.safetensors", std::span<const uint8_t>(data, size));
    volatile uint8_t sink = 0;
    for (const auto& e : f.tensors()) {
      if (f.find(e.name) != &e) __builtin_trap();  // names are unique, find() must agree
      const rinfer::TensorView v = f.view(e);
      const size_t n = v.nbytes();
      if (n != e.end - e.begin) __builtin_trap();
      // The first and last byte: ASan sees a span that leaves the input.
      if (n) sink = sink + static_cast<const uint8_t*>(v.data)[0] + static_cast<const uint8_t*>(v.data)[n - 1];
      f.release(e);
    }
    for (const auto& [k, v] : f.metadata()) sink = sink + uint8_t(k.size() + v.size());
    (void)sink;
  });
  return 0;
}

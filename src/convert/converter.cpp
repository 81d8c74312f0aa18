#include "convert/converter.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "convert/model_dir.h"
#include "core/error.h"

namespace rinfer {

void MemorySink::add(const TensorSpec& spec, DType dtype, Buffer&& data) {
  TensorView v{dtype, spec.shape, data.data()};
  store_.add(spec.name, v);
  store_.own(std::move(data));
}

namespace {
// Convert one tensor in row chunks through a small f32 staging buffer, so
// no full-size f32 copy of a large matrix is ever made.
Buffer convert_one(const HfCheckpoint& hf, const TensorSpec& spec, DType out_dtype, std::vector<float>& stage) {
  // Zero rows first: checks that the checkpoint holds the tensor with the
  // shape config.json implies before that shape sizes an allocation (a bad
  // vocab_size must say so, not "out of memory").
  float none = 0;
  hf.arch->read_hf_rows(hf.config, spec, *hf.tensors, 0, 0, &none);
  const int64_t rows = spec.shape.empty() ? 1 : spec.shape[0];
  const int64_t row_len = rows > 0 ? numel(spec.shape) / rows : 0;
  const size_t esz = dtype_size(out_dtype);
  Buffer out(size_t(numel(spec.shape)) * esz);
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(row_len, 1));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const int64_t r1 = std::min(rows, r0 + chunk_rows);
    stage.resize(size_t((r1 - r0) * row_len));
    hf.arch->read_hf_rows(hf.config, spec, *hf.tensors, r0, r1, stage.data());
    convert_from_f32(out_dtype, stage.data(), out.as<uint8_t>() + size_t(r0 * row_len) * esz, stage.size());
  }
  return out;
}
}  // namespace

ConvertStats convert_tensors(const HfCheckpoint& hf, const ConvertOptions& opts, WeightSink& sink) {
  RINFER_CHECK(opts.dtype == DType::F32 || opts.dtype == DType::F16 || opts.dtype == DType::BF16,
               "--dtype must be f32, f16 or bf16");
  ConvertStats stats;
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = opts.progress && isatty(STDERR_FILENO);
  std::set<std::string> used;
  std::vector<float> stage;
  const auto names = hf.tensors->names();
  for (int64_t g = kGlobalGroup; g < hf.config.n_layers; ++g) {
    sink.begin_group(g);
    for (const auto& spec : hf.arch->tensor_specs(hf.config, g)) {
      const DType dt = spec.role == TensorRole::Vector ? DType::F32 : opts.dtype;
      Buffer b = convert_one(hf, spec, dt, stage);
      stats.bytes_out += b.size();
      used.insert(spec.name);
      sink.add(spec, dt, std::move(b));
    }
    sink.end_group(g);
    // Hand the input pages of this group back: mapped pages count in RSS.
    for (const auto& n : names) hf.tensors->release(n);
    if (tty) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "\rconverting: layer %lld/%lld  %.0f MB/s   ", (long long)(g + 1),
                   (long long)hf.config.n_layers, s > 0 ? double(stats.bytes_out) / 1e6 / s : 0.0);
      std::fflush(stderr);
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  for (const auto& n : names) {
    if (const auto* e = hf.tensors->find(n)) stats.bytes_in += e->end - e->begin;
    if (!used.count(n) && !hf.arch->ignored_hf_tensor(hf.config, n)) stats.unused_hf_tensors.push_back(n);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace rinfer

#include <algorithm>
#include "convert/converter.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "convert/model_dir.h"
#include "core/error.h"

namespace rinfer {

namespace kc = kernels::cpu;

std::optional<WeightFormat> parse_weight_format(const std::string& name) {
  WeightFormat f;
  if (name == "int8" || name == "int4") {
    f.dtype = DType::BF16;
    f.quant = name == "int8" ? kc::QuantType::Q8 : kc::QuantType::Q4;
    return f;
  }
  auto dt = dtype_from_user_name(name);
  if (!dt || !(*dt == DType::F32 || *dt == DType::F16 || *dt == DType::BF16)) return std::nullopt;
  f.dtype = *dt;
  return f;
}

std::string weight_format_name(DType dtype, std::optional<kc::QuantType> quant) {
  if (quant) return *quant == kc::QuantType::Q8 ? "int8" : "int4";
  return std::string(dtype_user_name(dtype));
}

int64_t default_group_size(kc::QuantType t) { return t == kc::QuantType::Q8 ? 128 : 32; }

namespace {
// The quantization recipe: which tensors keep the float dtype.
//  - lm_head: the logits are what every token choice reads; quantizing it
//    costs the most accuracy per byte saved (as llama.cpp's Q8_0/Q4 recipes
//    keep output.weight at higher precision). --lm-head int8|int4 quantizes
//    it on request (ConvertOptions::lm_head_quant).
//  - MLA kv_b_proj: the absorbed attention repacks its raw rows (mla.cpp).
//  - embeddings (Embedding role), norms, biases and MoE routers (Vector role)
//    are not TensorRole::Matrix and never quantized.
bool quantizable(const TensorSpec& spec) {
  if (spec.role != TensorRole::Matrix || spec.shape.size() != 2) return false;
  const std::string& n = spec.name;
  auto ends_with = [&](const std::string& suf) {
    return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (n == "lm_head.weight" || ends_with("kv_b_proj.weight")) return false;
  return true;
}

// The BF16 matrices stored blocked (ConvertOptions::bf16_blocked): what
// Linear multiplies by (the quantizable ones plus lm_head), and the token
// embeddings when they are tied to the output layer (the decoder gathers
// its rows from the blocked layout), shape permitting.
bool blockable(const TensorSpec& spec, DType dt, bool tied_embeddings) {
  if (dt != DType::BF16 || spec.shape.size() != 2) return false;
  if (spec.role == TensorRole::Embedding) {
    if (!tied_embeddings) return false;
  } else if (spec.role != TensorRole::Matrix || (!quantizable(spec) && spec.name != "lm_head.weight")) {
    return false;
  }
  return kc::bf16_blockable(spec.shape[0], spec.shape[1]);
}
}  // namespace

Shape bf16_blocked_shape(int64_t N, int64_t K) { return {N / 8, K / 32, 8, 32}; }

void WeightSink::add_blocked(const TensorSpec& spec, Buffer&& data) {
  TensorSpec d = spec;
  d.shape = bf16_blocked_shape(spec.shape[0], spec.shape[1]);
  add(d, DType::BF16, std::move(data));
}

std::optional<QuantInfo> quant_info_for(const ConvertOptions& opts, const TensorSpec& spec) {
  if (!opts.quant) return std::nullopt;
  QuantInfo q;
  int64_t fixed = opts.group_size;
  if (spec.name == "lm_head.weight" && opts.lm_head_quant && spec.role == TensorRole::Matrix &&
      spec.shape.size() == 2) {
    q.type = *opts.lm_head_quant;
    fixed = q.type == *opts.quant ? opts.group_size : 0;  // another type: its own default group
  } else if (quantizable(spec)) {
    q.type = *opts.quant;
  } else {
    return std::nullopt;
  }
  const int64_t K = spec.shape[1];
  q.group_size = 0;
  if (fixed > 0) {
    if (K % fixed == 0) q.group_size = fixed;
  } else {
    for (int64_t g = default_group_size(q.type); g >= 32 && q.group_size == 0; g /= 2)
      if (K % g == 0) q.group_size = g;
  }
  if (q.group_size == 0) return std::nullopt;
  q.scale_dtype = DType::F16;
  return q;
}

void WeightSink::add_quantized(const TensorSpec& spec, const QuantInfo& q, Buffer&& data, Buffer&& scales) {
  const int64_t N = spec.shape[0], K = spec.shape[1];
  const int64_t Np = kc::quant_padded_rows(N);
  TensorSpec d = spec;
  d.shape = {Np, q.type == kc::QuantType::Q8 ? K : K / 2};
  add(d, DType::U8, std::move(data));
  TensorSpec s = spec;
  s.name = spec.name + kQuantScaleSuffix;
  s.shape = {Np / 16, K / q.group_size, 16};
  add(s, q.scale_dtype, std::move(scales));
}

void MemorySink::add_quantized(const TensorSpec& spec, const QuantInfo& q, Buffer&& data, Buffer&& scales) {
  kc::QuantizedWeight w;
  w.type = q.type;
  w.N = spec.shape[0];
  w.K = spec.shape[1];
  w.group_size = q.group_size;
  w.scale_dtype = q.scale_dtype;
  w.data = data.data();
  w.scales = scales.data();
  Buffer il(kc::quant_interleaved_bytes(w.type, w.N, w.K, w.group_size, w.scale_dtype));
  const kc::QuantizedWeight v = kc::interleave_quant_scales(w, il.data());
  TensorSpec d = spec;
  d.shape = {int64_t(il.size())};
  add(d, DType::U8, std::move(il));  // (the buffer moves, its bytes stay where v points)
  store_.add_quantized(spec.name, v);
}

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

// Quantize one matrix in chunks of 16-row blocks (the packed layout keeps
// each block contiguous), so only a chunk is ever held in f32.
void quantize_one(const HfCheckpoint& hf, const TensorSpec& spec, const QuantInfo& q, std::vector<float>& stage,
                  ThreadPool& pool, Buffer& data, Buffer& scales) {
  float none = 0;
  hf.arch->read_hf_rows(hf.config, spec, *hf.tensors, 0, 0, &none);
  const int64_t N = spec.shape[0], K = spec.shape[1];
  kc::check_quant_shape(q.type, N, K, q.group_size, q.scale_dtype);
  data = Buffer(kc::quant_data_bytes(q.type, N, K));
  scales = Buffer(kc::quant_scale_bytes(N, K, q.group_size, q.scale_dtype));
  const int64_t chunk = std::max<int64_t>(16, ((int64_t(1) << 22) / K) / 16 * 16);
  const size_t data_per_block = kc::quant_data_bytes(q.type, 16, K);
  const size_t scale_per_block = kc::quant_scale_bytes(16, K, q.group_size, q.scale_dtype);
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t r1 = std::min(N, r0 + chunk);
    stage.resize(size_t((r1 - r0) * K));
    hf.arch->read_hf_rows(hf.config, spec, *hf.tensors, r0, r1, stage.data());
    for (float v : stage)
      RINFER_CHECK(std::isfinite(v), "tensor ", spec.name, " has a non-finite value; cannot quantize it");
    kc::quantize_weights(stage.data(), r1 - r0, K, K, q.type, q.group_size, q.scale_dtype,
                         data.as<uint8_t>() + size_t(r0 / 16) * data_per_block,
                         scales.as<uint8_t>() + size_t(r0 / 16) * scale_per_block, pool);
  }
}
}  // namespace

ConvertStats convert_tensors(const HfCheckpoint& hf, const ConvertOptions& opts, WeightSink& sink) {
  RINFER_CHECK(opts.dtype == DType::F32 || opts.dtype == DType::F16 || opts.dtype == DType::BF16,
               "--dtype must be f32, f16, bf16, int8 or int4");
  if (opts.quant && opts.group_size != 0)
    RINFER_CHECK(kc::quant_group_size_supported(opts.group_size), "--group-size must be 32, 64 or 128, got ",
                 opts.group_size);
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = opts.pool;
  if (opts.quant && !pool) {
    own_pool = std::make_unique<ThreadPool>(0);
    pool = own_pool.get();
  }
  // --lm-head on a checkpoint whose output layer is the token embedding
  // table (tied): the table stays as it is for the lookup, and a quantized
  // copy of it is written as lm_head.weight next to it (the loader prefers
  // that over the table for the logits).
  std::string tied_head_source;  // the embedding table's name, when a copy of it becomes lm_head.weight
  TensorSpec tied_head;
  std::optional<QuantInfo> tied_head_q;
  if (opts.lm_head_quant) {
    RINFER_CHECK(opts.quant.has_value(), "--lm-head needs --dtype int8 or int4");
    bool has_head = false, has_table = false;
    for (const auto& spec : hf.arch->tensor_specs(hf.config, kGlobalGroup)) {
      has_head |= spec.name == "lm_head.weight";
      if (spec.role == TensorRole::Embedding && spec.shape.size() == 2) {
        has_table = true;
        tied_head_source = spec.name;
        tied_head = spec;
      }
    }
    RINFER_CHECK(has_head || has_table, "--lm-head: this architecture has no output layer to quantize");
    if (has_head) {
      tied_head_source.clear();
    } else {
      tied_head.name = "lm_head.weight";
      tied_head.role = TensorRole::Matrix;
      tied_head_q = quant_info_for(opts, tied_head);
      RINFER_CHECK(tied_head_q.has_value(), "--lm-head: the hidden size ", tied_head.shape[1],
                   " is not a multiple of 32, the smallest group");
    }
  }
  ConvertStats stats;
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = opts.progress && isatty(STDERR_FILENO);
  std::set<std::string> used;
  std::vector<float> stage;
  const auto names = hf.tensors->names();
  for (int64_t g = kGlobalGroup; g < hf.config.n_layers; ++g) {
    sink.begin_group(g);
    for (const auto& spec : hf.arch->tensor_specs(hf.config, g)) {
      used.insert(spec.name);
      if (opts.wanted && !opts.wanted(spec.name)) continue;
      if (!tied_head_source.empty() && spec.name == tied_head_source) {
        Buffer data, scales;
        quantize_one(hf, spec, *tied_head_q, stage, *pool, data, scales);  // rows read under the table's name
        stats.bytes_out += data.size() + scales.size();
        ++stats.quantized_tensors;
        sink.add_quantized(tied_head, *tied_head_q, std::move(data), std::move(scales));
      }
      if (const auto q = quant_info_for(opts, spec)) {
        Buffer data, scales;
        quantize_one(hf, spec, *q, stage, *pool, data, scales);
        stats.bytes_out += data.size() + scales.size();
        ++stats.quantized_tensors;
        sink.add_quantized(spec, *q, std::move(data), std::move(scales));
        continue;
      }
      if (opts.quant && spec.role == TensorRole::Matrix) stats.float_matrices.push_back(spec.name);
      const DType dt = spec.role == TensorRole::Vector ? DType::F32 : opts.dtype;
      Buffer b = convert_one(hf, spec, dt, stage);
      stats.bytes_out += b.size();
      if (opts.bf16_blocked && blockable(spec, dt, hf.config.tie_word_embeddings)) {
        // In place, 8 rows at a time: rows [8i, 8i + 8) occupy the same bytes
        // in both layouts, so only one 8-row group is ever copied.
        const int64_t N = spec.shape[0], K = spec.shape[1];
        std::vector<uint16_t> group(size_t(8 * K));
        for (int64_t n = 0; n < N; n += 8) {
          uint16_t* at = b.as<uint16_t>() + n * K;
          std::copy(at, at + 8 * K, group.begin());
          kc::block_bf16(group.data(), 8, K, at);
        }
        ++stats.blocked_tensors;
        sink.add_blocked(spec, std::move(b));
        continue;
      }
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

#include "convert/model_dir.h"


#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace rinfer {

#ifndef RINFER_VERSION_STRING
#define RINFER_VERSION_STRING "0.1.0"
#endif

std::string group_file_name(int64_t group) {
  if (group == kGlobalGroup) return "embeddings.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "layer_%03lld.safetensors", (long long)group);
  return buf;
}

bool is_model_dir(const std::string& dir) { return fs::exists(fs::path(dir) / kModelDescFile); }

ModelDirWriter::ModelDirWriter(std::string dir, const HfCheckpoint& hf, const ConvertOptions& opts)
    : dir_(std::move(dir)), hf_(hf), opts_(opts) {}

void ModelDirWriter::begin_group(int64_t) { pending_.clear(); }

void ModelDirWriter::add(const TensorSpec& spec, DType dtype, Buffer&& data) {
  pending_.emplace_back(spec, std::make_pair(dtype, std::move(data)));
}

void ModelDirWriter::add_quantized(const TensorSpec& spec, const QuantInfo& q, Buffer&& data, Buffer&& scales) {
  // The scheme, open for later additions (zero points: "zero_tensor"; GPTQ
  // / AWQ imports: "method").
  quant_[spec.name] = {{"quant", kernels::cpu::quant_type_name(q.type)},
                       {"group_size", q.group_size},
                       {"scale_dtype", std::string(dtype_user_name(q.scale_dtype))},
                       {"symmetric", true},
                       {"method", "rtn"},
                       {"layout", "rinfer-packed16-v1"},
                       {"shape", spec.shape},
                       {"scale_tensor", spec.name + kQuantScaleSuffix}};
  WeightSink::add_quantized(spec, q, std::move(data), std::move(scales));
}

void ModelDirWriter::add_blocked(const TensorSpec& spec, Buffer&& data) {
  blocked_[spec.name] = spec.shape;
  WeightSink::add_blocked(spec, std::move(data));
}

void ModelDirWriter::end_group(int64_t group) {
  const std::string file = group_file_name(group);
  io::SafetensorsWriter w;
  w.set_metadata("format", "rinfer");
  for (const auto& [spec, td] : pending_) {
    w.add(spec.name, td.first, spec.shape, td.second.data());
    tensors_[spec.name] = {{"file", file}, {"dtype", std::string(dtype_name(td.first))}, {"shape", spec.shape}};
    if (auto it = quant_.find(spec.name); it != quant_.end()) {
      // "shape" stays the logical [N, K]; "stored_shape" is the packed U8 tensor.
      tensors_[spec.name]["stored_shape"] = spec.shape;
      for (const auto& [k, v] : it->items()) tensors_[spec.name][k] = v;
    }
    if (auto it = blocked_.find(spec.name); it != blocked_.end()) {
      // "shape" is the logical [N, K]; the stored BF16 tensor is [N/8, K/32, 8, 32].
      tensors_[spec.name]["stored_shape"] = spec.shape;
      tensors_[spec.name]["shape"] = it->second;
      tensors_[spec.name]["layout"] = kBf16BlockedLayout;
    }
  }
  w.write((fs::path(dir_) / file).string());
  files_.push_back(file);
  pending_.clear();
}

void ModelDirWriter::finish(const ConvertStats& stats) {
  nlohmann::json desc;
  desc["format"] = "rinfer-model";
  desc["format_version"] = kModelFormatVersion;
  desc["architecture"] = hf_.config.architecture;
  desc["config"] = hf_.config.to_json();
  desc["dtype"] = {{"matrix", weight_format_name(opts_.dtype, opts_.quant)},
                   {"embedding", std::string(dtype_user_name(opts_.dtype))},
                   {"vector", "f32"}};
  if (opts_.quant) {
    desc["dtype"]["float_matrix"] = std::string(dtype_user_name(opts_.dtype));
    desc["quantization"] = {
        {"quant", kernels::cpu::quant_type_name(*opts_.quant)},
        {"group_size", opts_.group_size > 0 ? opts_.group_size : default_group_size(*opts_.quant)},
        {"group_size_fallback", opts_.group_size == 0},
        {"scale_dtype", "f16"},
        {"symmetric", true},
        {"quantized_tensors", stats.quantized_tensors},
        {"float_matrices", stats.float_matrices},
        {"lm_head", weight_format_name(opts_.dtype, opts_.lm_head_quant)},
        {"note", "TensorRole::Matrix tensors except lm_head (unless --lm-head int8|int4) and MLA kv_b_proj, where "
                 "K is a multiple of the group size; per-tensor scheme under tensors.<name>"}};
  }
  desc["source"] = {{"path", fs::absolute(hf_.dir).string()},
                    {"dtype", std::string(dtype_user_name(hf_.storage_dtype()))},
                    {"bytes", stats.bytes_in}};
  desc["converter"] = {{"name", "rinfer convert"}, {"version", RINFER_VERSION_STRING}};
  desc["files"] = files_;
  desc["tensors"] = tensors_;
  const std::string path = (fs::path(dir_) / kModelDescFile).string();
  std::ofstream out(path, std::ios::binary);
  out << desc.dump(1) << "\n";
  out.close();
  RINFER_CHECK(out, "cannot write ", path);
}

namespace {
const char* kTokenizerFiles[] = {"tokenizer.model",       "tokenizer.json",          "tokenizer_config.json",
                                 "special_tokens_map.json", "generation_config.json", "added_tokens.json",
                                 "vocab.json",            "merges.txt",              "qwen.tiktoken"};
}

ConvertStats convert_to_dir(const std::string& hf_dir, const std::string& out_dir, const ConvertOptions& opts) {
  HfCheckpoint hf = HfCheckpoint::open(hf_dir);
  RINFER_CHECK(!out_dir.empty(), "--out must not be empty");
  fs::path out = fs::path(out_dir).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "dir/" names dir, not a child of it
  RINFER_CHECK(!fs::exists(out), "output directory ", out_dir, " already exists; remove it or choose another --out");
  fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  RINFER_CHECK(fs::is_directory(parent), "parent directory of --out (", parent.string(), ") does not exist");
  // Build under a temporary name in the same folder and rename at the end:
  // an interrupted conversion leaves nothing that looks like a model.
  StagingDir staging(out);
  const fs::path& tmp = staging.path();
  ModelDirWriter writer(tmp.string(), hf, opts);
  ConvertStats stats = convert_tensors(hf, opts, writer);
  for (const char* f : kTokenizerFiles) {
    fs::path src = fs::path(hf_dir) / f;
    if (fs::exists(src)) fs::copy_file(src, tmp / f);
  }
  fs::copy_file(fs::path(hf_dir) / "config.json", tmp / "hf_config.json");
  writer.finish(stats);
  staging.commit();
  return stats;
}

namespace {
namespace kc = kernels::cpu;

// Quantized tensor `name` as model_desc.json records it (`info`), checked
// against its stored data and scale tensors (`stored`: every tensor, viewed
// in its file); returns the view of it in the separate layout.
kc::QuantizedWeight stored_quantized(const std::string& dir, const std::string& desc_path, const std::string& name,
                                     const nlohmann::json& info, const std::map<std::string, TensorView>& stored,
                                     std::string& scale_name) {
  const std::string q = info.at("quant").get<std::string>();
  RINFER_CHECK(q == "q8" || q == "q4", desc_path, ": tensor ", name, ": unsupported quant \"", q, "\"");
  RINFER_CHECK(info.value("symmetric", true) && !info.contains("zero_tensor"), desc_path, ": tensor ", name,
               ": asymmetric quantization is not supported by this rinfer");
  const auto qt = q == "q8" ? kc::QuantType::Q8 : kc::QuantType::Q4;
  const auto shape = info.at("shape").get<Shape>();
  const int64_t g = info.at("group_size").get<int64_t>();
  RINFER_CHECK(shape.size() == 2, desc_path, ": tensor ", name, ": quantized tensors must be 2-D");
  RINFER_CHECK(info.value("scale_dtype", "f16") == "f16", desc_path, ": tensor ", name, ": scale dtype must be f16");
  kc::check_quant_shape(qt, shape[0], shape[1], g, DType::F16);
  const int64_t Np = kc::quant_padded_rows(shape[0]);
  const TensorView d = stored.at(name);
  const Shape want_data = {Np, qt == kc::QuantType::Q8 ? shape[1] : shape[1] / 2};
  const Shape want_scales = {Np / 16, shape[1] / g, 16};
  RINFER_CHECK(d.dtype == DType::U8 && d.shape == want_data, dir, ": quantized tensor ", name, " has dtype ",
               dtype_name(d.dtype), " shape ", shape_str(d.shape), ", not what its ", q, " scheme needs");
  scale_name = info.value("scale_tensor", name + kQuantScaleSuffix);
  const auto sit = stored.find(scale_name);
  RINFER_CHECK(sit != stored.end(), dir, ": scales ", scale_name, " of quantized tensor ", name, " are missing");
  const TensorView sv = sit->second;
  RINFER_CHECK(sv.dtype == DType::F16 && sv.shape == want_scales, dir, ": scales ", scale_name, " have dtype ",
               dtype_name(sv.dtype), " shape ", shape_str(sv.shape), ", expected F16 [", Np / 16, ", ", shape[1] / g,
               ", 16]");
  kc::QuantizedWeight w;
  w.type = qt;
  w.N = shape[0];
  w.K = shape[1];
  w.group_size = g;
  w.scale_dtype = DType::F16;
  w.data = d.data;
  w.scales = sv.data;
  return w;
}

size_t round_up64(size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

ModelConfig read_model_dir_config(const std::string& dir) {
  const std::string desc_path = (fs::path(dir) / kModelDescFile).string();
  const nlohmann::json desc = read_json_file(desc_path);
  try {
    return ModelConfig::from_json(desc.at("config"));
  } catch (const nlohmann::json::exception& e) {
    fail(desc_path, ": ", e.what());
  }
}

StoredBytes read_model_dir_bytes(const std::string& dir, int64_t n_layers) {
  const std::string desc_path = (fs::path(dir) / kModelDescFile).string();
  const nlohmann::json desc = read_json_file(desc_path);
  StoredBytes b;
  b.layers.assign(size_t(std::max<int64_t>(n_layers, 0)), 0.0);
  double table = 0, head = 0;
  bool has_head = false;
  try {
    for (const auto& [name, info] : desc.at("tensors").items()) {
      const auto dt = dtype_from_name(info.at("dtype").get<std::string>());
      RINFER_CHECK(dt.has_value(), desc_path, ": tensor ", name, ": unknown dtype ", info.at("dtype"));
      double bytes = double(dtype_size(*dt));
      for (int64_t d : info.value("stored_shape", info.at("shape")).get<Shape>()) bytes *= double(d);
      const std::string lp = "model.layers.";
      if (name.compare(0, lp.size(), lp) == 0) {
        const int64_t l = std::atoll(name.c_str() + lp.size());
        if (l >= 0 && l < n_layers) b.layers[size_t(l)] += bytes;
      } else if (name.compare(0, 8, "lm_head.") == 0) {
        head += bytes;
        has_head = true;
      } else if (name == "model.embed_tokens.weight") {
        table = bytes;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail(desc_path, ": ", e.what());
  }
  b.head = has_head ? head : table;
  return b;
}

ModelDir load_model_dir(const std::string& dir, WeightLoadMode mode, const TensorFilter& wanted,
                        const TensorFilter& keep_mapped) {
  const std::string desc_path = (fs::path(dir) / kModelDescFile).string();
  ModelDir md;
  md.desc = read_json_file(desc_path);
  try {
    RINFER_CHECK(md.desc.value("format", "") == "rinfer-model", desc_path, ": not a rinfer model description");
    int version = md.desc.at("format_version").get<int>();
    RINFER_CHECK(version == kModelFormatVersion, desc_path, ": format_version ", version,
                 " is not supported by this rinfer (supports ", kModelFormatVersion, ")");
    md.config = ModelConfig::from_json(md.desc.at("config"));
    const auto wf = parse_weight_format(md.desc.at("dtype").at("matrix").get<std::string>());
    RINFER_CHECK(wf.has_value(), desc_path, ": unknown dtype ", md.desc.at("dtype").at("matrix"));
    md.dtype = wf->dtype;
    md.quant = wf->quant;
    if (md.quant) {
      auto et = dtype_from_user_name(md.desc.at("dtype").at("embedding").get<std::string>());
      RINFER_CHECK(et.has_value(), desc_path, ": unknown embedding dtype");
      md.dtype = *et;
    }
    md.weights = std::make_unique<WeightStore>();
    md.weights->source = dir;
    const nlohmann::json& tensors = md.desc.at("tensors");
    // Every file mapped, every tensor viewed in its mapping: checked against
    // the description before anything is copied.
    std::vector<std::shared_ptr<io::SafetensorsFile>> files;
    std::map<std::string, TensorView> stored;
    std::map<std::string, size_t> file_of;
    auto want = [&](const std::string& name) { return !wanted || wanted(name); };
    std::set<std::string> needed_files;
    for (const auto& [name, info] : tensors.items())
      if (want(name)) needed_files.insert(info.at("file").get<std::string>());
    for (const auto& file : md.desc.at("files")) {
      if (!needed_files.count(file.get<std::string>())) continue;
      const std::string path = (fs::path(dir) / file.get<std::string>()).string();
      files.push_back(std::make_shared<io::SafetensorsFile>(path));
      for (const auto& e : files.back()->tensors()) {
        RINFER_CHECK(tensors.contains(e.name), path, ": tensor ", e.name, " is not in model_desc.json");
        RINFER_CHECK(stored.emplace(e.name, files.back()->view(e)).second, dir, ": tensor ", e.name,
                     " is stored twice");
        file_of[e.name] = files.size() - 1;
      }
    }
    std::map<std::string, kc::QuantizedWeight> quantized;  // by data tensor, separate layout, in the mappings
    std::map<std::string, std::string> scales_of;          // scale tensor -> its data tensor
    std::map<std::string, std::string> scale_name;         // data tensor -> its scale tensor
    for (const auto& [name, info] : tensors.items()) {
      if (!needed_files.count(info.at("file").get<std::string>())) continue;
      RINFER_CHECK(stored.count(name), dir, ": tensor ", name, " listed in model_desc.json is missing from ",
                   info.at("file").get<std::string>());
      if (!info.contains("quant") && info.contains("layout")) {
        const std::string layout = info.at("layout").get<std::string>();
        RINFER_CHECK(layout == kBf16BlockedLayout, desc_path, ": tensor ", name, ": unsupported layout \"", layout,
                     "\"");
        const auto shape = info.at("shape").get<Shape>();
        const TensorView d = stored.at(name);
        RINFER_CHECK(shape.size() == 2 && kernels::cpu::bf16_blockable(shape[0], shape[1]) && d.dtype == DType::BF16 &&
                         d.shape == bf16_blocked_shape(shape[0], shape[1]),
                     dir, ": blocked tensor ", name, " has dtype ", dtype_name(d.dtype), " shape ", shape_str(d.shape),
                     ", not what layout ", layout, " needs for ", shape_str(shape));
        continue;
      }
      if (!info.contains("quant")) continue;
      std::string sname;
      quantized[name] = stored_quantized(dir, desc_path, name, info, stored, sname);
      RINFER_CHECK(file_of.at(sname) == file_of.at(name), dir, ": scales ", sname, " of quantized tensor ", name,
                   " are not in its file");
      scales_of[sname] = name;
      scale_name[name] = sname;
      // The body's scheme (an int8 output layer next to int4 layers, --lm-head,
      // is not what "the model's group size" describes).
      if (name != "lm_head.weight") md.group_size = std::max(md.group_size, quantized[name].group_size);
    }
    for (size_t f = 0; f < files.size(); ++f) {
      const auto& st = files[f];
      if (mode == WeightLoadMode::Mmap || st->tensors().empty()) {
        // The tensors stay in the mapping, quantized ones in the separate layout.
        for (const auto& e : st->tensors()) {
          if (!want(e.name)) continue;
          md.weights->add(e.name, stored.at(e.name));
          if (quantized.count(e.name)) md.weights->add_quantized(e.name, quantized.at(e.name));
          if (scales_of.count(e.name)) continue;
          const io::TensorEntry* scales = nullptr;
          if (quantized.count(e.name)) scales = st->find(scale_name.at(e.name));
          md.weights->set_page_release(e.name, [st, e, scales](size_t from, size_t len) {
            if (len != WeightStore::kAll) return st->release(e, from, len);
            st->release(e);
            if (scales) st->release(*scales);
          });
        }
        md.weights->own_mapping(std::shared_ptr<void>(st), [st] {
          for (const auto& e : st->tensors()) st->release(e);
        });
        continue;
      }
      // Copy: one anonymous buffer per file, each tensor 64-byte aligned in
      // it; a quantized matrix takes the interleaved layout (its scales inside
      // the data, ops.h), which the decode GEMVs stream as one run of lines
      // per block (docs/performance.md), and its scale tensor is not kept.
      // Bytes of tensor e in the copy (before its 64-byte alignment).
      auto copied_bytes = [&](const io::TensorEntry& e) {
        const auto q = quantized.find(e.name);
        if (q == quantized.end()) return size_t(e.end - e.begin);
        const kc::QuantizedWeight& w = q->second;
        return kc::quant_interleaved_bytes(w.type, w.N, w.K, w.group_size, w.scale_dtype);
      };
      size_t total = 0;
      // A scale tensor goes with its data tensor; a stage skips the others'.
      auto mapped = [&](const io::TensorEntry& e) { return keep_mapped && keep_mapped(e.name); };
      auto copied = [&](const io::TensorEntry& e) {
        return !scales_of.count(e.name) && want(e.name) && !mapped(e);
      };
      for (const auto& e : st->tensors())
        if (copied(e)) total += round_up64(copied_bytes(e));
      Buffer copy(std::max<size_t>(total, 64));
      size_t at = 0;
      for (const auto& e : st->tensors()) {
        if (!copied(e)) continue;
        uint8_t* dst = copy.as<uint8_t>() + at;
        TensorView v = stored.at(e.name);
        const auto q = quantized.find(e.name);
        const size_t bytes = copied_bytes(e);
        // The pages read for the copy leave as it goes: peak memory is the
        // weights plus a chunk, not plus a file (a token table can be most
        // of a small model).
        if (q == quantized.end()) {
          constexpr size_t kChunk = size_t(16) << 20;
          const auto* src = static_cast<const uint8_t*>(v.data);
          for (size_t off = 0; off < bytes; off += kChunk) {
            const size_t n = std::min(kChunk, bytes - off);
            std::memcpy(dst + off, src + off, n);
            st->release(e, off, n);
          }
          v.data = dst;
          md.weights->add(e.name, v);
        } else {
          md.weights->add(e.name, TensorView{DType::U8, {int64_t(bytes)}, dst});
          md.weights->add_quantized(e.name, kc::interleave_quant_scales(q->second, dst));
          st->release(e);
        }
        at += round_up64(bytes);
      }
      md.weights->own(std::move(copy));
      bool keeps_mapping = false;
      for (const auto& e : st->tensors())
        if (want(e.name) && mapped(e)) {
          md.weights->add(e.name, stored.at(e.name));
          // A quantized matrix left mapped keeps the separate layout (its
          // scales beside it in the file).
          const io::TensorEntry* scales = nullptr;
          if (quantized.count(e.name)) {
            md.weights->add_quantized(e.name, quantized.at(e.name));
            scales = st->find(scale_name.at(e.name));
          }
          md.weights->set_page_release(e.name, [st, e, scales](size_t from, size_t len) {
            if (len != WeightStore::kAll) return st->release(e, from, len);
            st->release(e);
            if (scales) st->release(*scales);
          });
          keeps_mapping = true;
        }
      if (keeps_mapping) {
        md.weights->own(std::shared_ptr<void>(st));
        continue;
      }
      // Unmapped now: the file's pages read for the copy leave the process
      // (peak memory one file above the weights, not twice the weights).
      files[f].reset();
    }
  } catch (const nlohmann::json::exception& e) {
    fail(desc_path, ": ", e.what());
  }
  return md;
}

}  // namespace rinfer

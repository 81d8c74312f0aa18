#include "convert/model_dir.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

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
  fs::path tmp = parent / (out.filename().string() + ".tmp-" + std::to_string(getpid()));
  fs::remove_all(tmp);
  fs::create_directory(tmp);
  try {
    ModelDirWriter writer(tmp.string(), hf, opts);
    ConvertStats stats = convert_tensors(hf, opts, writer);
    for (const char* f : kTokenizerFiles) {
      fs::path src = fs::path(hf_dir) / f;
      if (fs::exists(src)) fs::copy_file(src, tmp / f);
    }
    fs::copy_file(fs::path(hf_dir) / "config.json", tmp / "hf_config.json");
    writer.finish(stats);
    fs::rename(tmp, out);
    return stats;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

ModelDir load_model_dir(const std::string& dir, WeightLoadMode mode) {
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
    for (const auto& file : md.desc.at("files")) {
      const std::string path = (fs::path(dir) / file.get<std::string>()).string();
      auto st = std::make_shared<io::SafetensorsFile>(path);
      Buffer copy;
      const uint8_t* base = nullptr;
      const uint8_t* copy_base = nullptr;
      if (mode == WeightLoadMode::Copy && !st->tensors().empty()) {
        // One anonymous buffer per file holding its whole data section.
        uint64_t lo = UINT64_MAX, hi = 0;
        for (const auto& e : st->tensors()) {
          lo = std::min(lo, e.begin);
          hi = std::max(hi, e.end);
        }
        base = static_cast<const uint8_t*>(st->view(st->tensors().front()).data) - st->tensors().front().begin;
        copy = Buffer(size_t(hi - lo) + 64);
        std::memcpy(copy.data(), base + lo, size_t(hi - lo));
        copy_base = copy.as<uint8_t>() - lo;
      }
      for (const auto& e : st->tensors()) {
        auto it = md.desc.at("tensors").find(e.name);
        RINFER_CHECK(it != md.desc.at("tensors").end(), path, ": tensor ", e.name, " is not in model_desc.json");
        TensorView v = st->view(e);
        if (copy_base) v.data = copy_base + e.begin;
        md.weights->add(e.name, v);
      }
      if (copy_base) {
        md.weights->own(std::move(copy));
      } else {
        md.weights->own(std::shared_ptr<void>(st));
      }
    }
    for (const auto& [name, info] : md.desc.at("tensors").items()) {
      RINFER_CHECK(md.weights->has(name), dir, ": tensor ", name, " listed in model_desc.json is missing from ",
                   info.at("file").get<std::string>());
      if (!info.contains("quant") && info.contains("layout")) {
        const std::string layout = info.at("layout").get<std::string>();
        RINFER_CHECK(layout == kBf16BlockedLayout, desc_path, ": tensor ", name, ": unsupported layout \"", layout,
                     "\"");
        const auto shape = info.at("shape").get<Shape>();
        const TensorView d = md.weights->tensors().at(name);
        RINFER_CHECK(shape.size() == 2 && kernels::cpu::bf16_blockable(shape[0], shape[1]) && d.dtype == DType::BF16 &&
                         d.shape == bf16_blocked_shape(shape[0], shape[1]),
                     dir, ": blocked tensor ", name, " has dtype ", dtype_name(d.dtype), " shape ", shape_str(d.shape),
                     ", not what layout ", layout, " needs for ", shape_str(shape));
        continue;
      }
      if (!info.contains("quant")) continue;
      // A quantized tensor: check that what is stored is what the description
      // says (Linear rebuilds the QuantizedWeight view from the two tensors).
      const std::string q = info.at("quant").get<std::string>();
      RINFER_CHECK(q == "q8" || q == "q4", desc_path, ": tensor ", name, ": unsupported quant \"", q, "\"");
      RINFER_CHECK(info.value("symmetric", true) && !info.contains("zero_tensor"), desc_path, ": tensor ", name,
                   ": asymmetric quantization is not supported by this rinfer");
      const auto qt = q == "q8" ? kernels::cpu::QuantType::Q8 : kernels::cpu::QuantType::Q4;
      const auto shape = info.at("shape").get<Shape>();
      const int64_t g = info.at("group_size").get<int64_t>();
      RINFER_CHECK(shape.size() == 2, desc_path, ": tensor ", name, ": quantized tensors must be 2-D");
      RINFER_CHECK(info.value("scale_dtype", "f16") == "f16", desc_path, ": tensor ", name, ": scale dtype must be f16");
      kernels::cpu::check_quant_shape(qt, shape[0], shape[1], g, DType::F16);
      const int64_t Np = kernels::cpu::quant_padded_rows(shape[0]);
      const TensorView d = md.weights->tensors().at(name);
      const Shape want_data = {Np, qt == kernels::cpu::QuantType::Q8 ? shape[1] : shape[1] / 2};
      const Shape want_scales = {Np / 16, shape[1] / g, 16};
      RINFER_CHECK(d.dtype == DType::U8 && d.shape == want_data,
                   dir, ": quantized tensor ", name, " has dtype ", dtype_name(d.dtype), " shape ", shape_str(d.shape),
                   ", not what its ", q, " scheme needs");
      const std::string sname = info.value("scale_tensor", name + kQuantScaleSuffix);
      RINFER_CHECK(md.weights->has(sname), dir, ": scales ", sname, " of quantized tensor ", name, " are missing");
      const TensorView sv = md.weights->tensors().at(sname);
      RINFER_CHECK(sv.dtype == DType::F16 && sv.shape == want_scales, dir, ": scales ", sname,
                   " have dtype ", dtype_name(sv.dtype), " shape ", shape_str(sv.shape), ", expected F16 [",
                   Np / 16, ", ", shape[1] / g, ", 16]");
      // The body's scheme (an int8 output layer next to int4 layers, --lm-head,
      // is not what "the model's group size" describes).
      if (name != "lm_head.weight") md.group_size = std::max(md.group_size, g);
    }
  } catch (const nlohmann::json::exception& e) {
    fail(desc_path, ": ", e.what());
  }
  return md;
}

}  // namespace rinfer

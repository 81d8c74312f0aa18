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

void ModelDirWriter::end_group(int64_t group) {
  const std::string file = group_file_name(group);
  io::SafetensorsWriter w;
  w.set_metadata("format", "rinfer");
  for (const auto& [spec, td] : pending_) {
    w.add(spec.name, td.first, spec.shape, td.second.data());
    tensors_[spec.name] = {{"file", file}, {"dtype", std::string(dtype_name(td.first))}, {"shape", spec.shape}};
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
  desc["dtype"] = {{"matrix", std::string(dtype_user_name(opts_.dtype))},
                   {"embedding", std::string(dtype_user_name(opts_.dtype))},
                   {"vector", "f32"}};
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
    auto dt = dtype_from_user_name(md.desc.at("dtype").at("matrix").get<std::string>());
    RINFER_CHECK(dt.has_value(), desc_path, ": unknown dtype");
    md.dtype = *dt;
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
    for (const auto& [name, info] : md.desc.at("tensors").items())
      RINFER_CHECK(md.weights->has(name), dir, ": tensor ", name, " listed in model_desc.json is missing from ",
                   info.at("file").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    fail(desc_path, ": ", e.what());
  }
  return md;
}

}  // namespace rinfer

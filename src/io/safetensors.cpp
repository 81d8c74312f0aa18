#include "io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"

namespace rinfer::io {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // same cap as the reference implementation
constexpr const char* kMetadataKey = "__metadata__";

// Names and parser messages come from untrusted bytes: escape control
// characters so every error stays on one line.
std::string one_line(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string printable(std::string_view s) { return "'" + one_line(s) + "'"; }

std::string known_dtypes() {
  std::string out;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I16, DType::I32,
                  DType::I64, DType::BOOL, DType::F8_E4M3, DType::F8_E5M2}) {
    if (!out.empty()) out += ", ";
    out += dtype_name(t);
  }
  return out;
}

// The element count of `shape` times `elem`, or false when negative or too
// large (beyond int64, so numel() and nbytes() downstream cannot overflow).
bool checked_nbytes(const Shape& shape, uint64_t elem, uint64_t* out) {
  uint64_t n = elem;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n)) return false;
  }
  if (n > uint64_t(std::numeric_limits<int64_t>::max())) return false;
  *out = n;
  return true;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

TensorEntry parse_entry(const std::string& path, const std::string& name, const json& v, uint64_t data_size) {
  auto bad = [&](const auto&... what) { fail(path, ": tensor ", printable(name), ": ", what...); };
  if (!v.is_object()) bad("header entry is not a JSON object");

  TensorEntry e;
  e.name = name;

  auto dt = v.find("dtype");
  if (dt == v.end()) bad("missing \"dtype\"");
  if (!dt->is_string()) bad("\"dtype\" is not a string");
  const auto& dname = dt->get_ref<const std::string&>();
  auto parsed = dtype_from_name(dname);
  if (!parsed) bad("unknown dtype ", printable(dname), " (known: ", known_dtypes(), ")");
  e.dtype = *parsed;

  auto sh = v.find("shape");
  if (sh == v.end()) bad("missing \"shape\"");
  if (!sh->is_array()) bad("\"shape\" is not an array");
  for (const auto& d : *sh) {
    if (d.is_number_unsigned()) {
      uint64_t u = d.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) bad("shape dimension ", u, " is too large");
      e.shape.push_back(int64_t(u));
    } else if (d.is_number_integer()) {
      bad("negative shape dimension ", d.get<int64_t>());
    } else {
      bad("shape dimension is not an integer");
    }
  }

  auto off = v.find("data_offsets");
  if (off == v.end()) bad("missing \"data_offsets\"");
  if (!off->is_array() || off->size() != 2) bad("\"data_offsets\" is not an array of two integers");
  for (const auto& o : *off) {
    if (o.is_number_integer() && !o.is_number_unsigned()) bad("negative data offset ", o.get<int64_t>());
    if (!o.is_number_unsigned()) bad("\"data_offsets\" is not an array of two integers");
  }
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  if (e.begin > e.end) bad("data_offsets begin ", e.begin, " > end ", e.end);
  if (e.end > data_size)
    bad("data_offsets [", e.begin, ", ", e.end, "] run past the end of file (data section is ", data_size, " bytes)");

  uint64_t nbytes = 0;
  if (!checked_nbytes(e.shape, dtype_size(e.dtype), &nbytes)) bad("shape ", shape_str(e.shape), " is too large");
  if (nbytes != e.end - e.begin)
    bad("shape ", shape_str(e.shape), " x ", dtype_name(e.dtype), " needs ", nbytes, " bytes but data_offsets span ",
        e.end - e.begin);
  return e;
}

}  // namespace

// ---------------------------------------------------------------- reader

SafetensorsFile::SafetensorsFile(const std::string& path) : name_(path), file_(path) {
  parse(file_.data(), file_.size());
}

SafetensorsFile::SafetensorsFile(std::string name, std::span<const uint8_t> bytes) : name_(std::move(name)) {
  parse(bytes.data(), bytes.size());
}

void SafetensorsFile::parse(const uint8_t* bytes, uint64_t size) {
  const std::string& path = name_;
  bytes_ = bytes;
  if (size < 8) fail(path, ": not a safetensors file (", size, " bytes, shorter than the 8-byte header length)");
  const uint64_t hlen = read_u64_le(bytes);
  if (hlen > kMaxHeaderBytes)
    fail(path, ": not a safetensors file (header length ", hlen, " exceeds the ", kMaxHeaderBytes, " byte limit)");
  if (hlen > size - 8)
    fail(path, ": truncated or not a safetensors file (header length ", hlen, " but the file has only ", size,
         " bytes)");
  const uint64_t data_size = size - 8 - hlen;
  data_section_ = bytes + 8 + hlen;

  // nlohmann keeps the last of duplicate keys; a duplicated tensor name would
  // silently hide one entry, so spot top-level duplicates while parsing.
  std::set<std::string> seen_keys;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1 && duplicate.empty() && parsed.is_string()) {
      if (!seen_keys.insert(parsed.get<std::string>()).second) duplicate = parsed.get<std::string>();
    }
    return true;
  };

  json header;
  const char* hbegin = reinterpret_cast<const char*>(bytes + 8);
  // nlohmann stops at a NUL byte as if the input ended, which would let
  // trailing garbage through; JSON text never contains one.
  if (std::memchr(hbegin, '\0', hlen)) fail(path, ": safetensors header is not valid JSON (contains a NUL byte)");
  if (json_depth(std::string_view(hbegin, hlen)) > kMaxJsonDepth)
    fail(path, ": safetensors header nests deeper than ", kMaxJsonDepth, " levels");
  try {
    header = json::parse(hbegin, hbegin + hlen, on_event);
  } catch (const json::exception& ex) {
    fail(path, ": safetensors header is not valid JSON: ", one_line(ex.what()));
  }
  if (!header.is_object()) fail(path, ": safetensors header is not a JSON object");
  if (!duplicate.empty()) fail(path, ": safetensors header lists ", printable(duplicate), " twice");

  try {
    for (const auto& [key, value] : header.items()) {
      if (key == kMetadataKey) {
        if (!value.is_object()) fail(path, ": \"__metadata__\" is not a JSON object");
        for (const auto& [mk, mv] : value.items()) {
          if (!mv.is_string()) fail(path, ": \"__metadata__\" value for ", printable(mk), " is not a string");
          metadata_[mk] = mv.get<std::string>();
        }
        continue;
      }
      tensors_.push_back(parse_entry(path, key, value, data_size));
    }
  } catch (const json::exception& ex) {
    // Should not happen (types are checked first), but never let one escape.
    fail(path, ": malformed safetensors header: ", one_line(ex.what()));
  }

  // File order: streaming conversion then walks the mapping front to back.
  std::stable_sort(tensors_.begin(), tensors_.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // After sorting by begin, two spans overlap iff one starts before the
  // furthest end seen so far (empty tensors occupy no bytes).
  const TensorEntry* furthest = nullptr;
  for (const auto& e : tensors_) {
    if (e.begin == e.end) continue;
    if (furthest && e.begin < furthest->end)
      fail(path, ": tensors ", printable(furthest->name), " [", furthest->begin, ", ", furthest->end, ") and ",
           printable(e.name), " [", e.begin, ", ", e.end, ") overlap");
    if (!furthest || e.end > furthest->end) furthest = &e;
  }
  // As the format's reference loader: the spans tile the data section, no
  // gap and nothing after the last one. A header length that is off by a
  // few bytes (every weight shifted) or bytes appended to the file would
  // otherwise load and generate garbage.
  uint64_t at = 0;
  for (const auto& e : tensors_) {
    if (e.begin != at)
      fail(path, ": bytes [", at, ", ", e.begin, ") of the data section belong to no tensor (the next is ",
           printable(e.name), "); safetensors allows no gaps");
    at = e.end;
  }
  if (at != data_size)
    fail(path, ": ", data_size - at, " bytes after the last tensor's data (the header says ", at, " of ", data_size,
         "): a damaged file or a wrong header length");
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const TensorEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

TensorView SafetensorsFile::view(const TensorEntry& e) const {
  TensorView v;
  v.dtype = e.dtype;
  v.shape = e.shape;
  v.data = data_section_ + e.begin;
  return v;
}

void SafetensorsFile::release(const TensorEntry& e) const {
  file_.release(size_t(data_section_ - bytes_) + e.begin, e.end - e.begin);
}

void SafetensorsFile::release(const TensorEntry& e, size_t from, size_t len) const {
  const size_t size = e.end - e.begin;
  if (from >= size) return;
  file_.release(size_t(data_section_ - bytes_) + e.begin + from, std::min(len, size - from));
}

// ---------------------------------------------------------------- checkpoint

namespace {

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Files in `dir` (sorted) whose name satisfies `pred`.
template <typename Pred>
std::vector<fs::path> list_files(const fs::path& dir, Pred pred) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_regular(it->path()) && pred(it->path().filename().string())) out.push_back(it->path());
  }
  if (ec) fail("cannot list model directory ", dir.string(), ": ", ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& dir) : dir_(dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::exists(root, ec)) fail("model directory ", dir, " does not exist");
  if (!fs::is_directory(root, ec)) fail("model path ", dir, " is not a directory");

  // Each file name, and for sharded checkpoints the tensors the index promises in it.
  std::vector<fs::path> paths;
  std::map<std::string, std::vector<std::string>> promised;  // shard name -> tensor names
  std::vector<const std::vector<std::string>*> promised_of;  // parallel to paths when sharded
  const fs::path index_path = root / "model.safetensors.index.json";
  if (is_regular(index_path)) {
    const std::string ip = index_path.string();
    json index = read_json_file(index_path.string());
    if (!index.is_object()) fail(ip, ": not a JSON object");
    auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) fail(ip, ": missing \"weight_map\" object");
    for (const auto& [tname, shard] : wm->items()) {
      if (!shard.is_string()) fail(ip, ": weight_map entry for ", printable(tname), " is not a string");
      const auto& s = shard.get_ref<const std::string&>();
      const fs::path rel(s);
      // Shards live in the checkpoint folder; refuse names that would reach outside it.
      bool escapes = s.empty() || rel.is_absolute();
      for (const auto& part : rel) escapes = escapes || part == "..";
      if (escapes) fail(ip, ": shard name ", printable(s), " is not a file inside ", dir);
      promised[s].push_back(tname);
    }
    if (promised.empty()) fail(ip, ": weight_map lists no tensors");
    for (const auto& [shard, names] : promised) {
      const fs::path p = root / shard;
      if (!is_regular(p)) fail(ip, " lists shard ", printable(shard), " but ", p.string(), " does not exist");
      paths.push_back(p);
      promised_of.push_back(&names);
    }
  } else if (is_regular(root / "model.safetensors")) {
    paths.push_back(root / "model.safetensors");
  } else {
    paths = list_files(root, [](const std::string& n) { return ends_with(n, ".safetensors"); });
  }

  if (paths.empty()) {
    auto pickles = list_files(
        root, [](const std::string& n) { return ends_with(n, ".bin") || ends_with(n, ".pt") || ends_with(n, ".pth"); });
    if (!pickles.empty())
      fail("model directory ", dir, " holds a PyTorch pickle checkpoint (", pickles.front().filename().string(),
           "), not safetensors; rinfer reads only *.safetensors: re-save the model with "
           "save_pretrained(..., safe_serialization=True)");
    fail("no *.safetensors files in ", dir);
  }

  for (size_t i = 0; i < paths.size(); ++i) {
    files_.push_back(std::make_unique<SafetensorsFile>(paths[i].string()));
    const SafetensorsFile* f = files_.back().get();
    for (const auto& e : f->tensors()) {
      auto [it, inserted] = index_.try_emplace(e.name, f, &e);
      if (!inserted)
        fail("tensor ", printable(e.name), " appears in both ", it->second.first->path(), " and ", f->path());
    }
    if (i < promised_of.size()) {
      for (const auto& tname : *promised_of[i]) {
        if (!f->find(tname))
          fail((root / "model.safetensors.index.json").string(), " maps ", printable(tname), " to ", f->path(),
               " but that file has no such tensor");
      }
    }
  }
}

bool SafetensorsCheckpoint::has(std::string_view name) const { return index_.find(name) != index_.end(); }

const TensorEntry* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.second;
}

TensorView SafetensorsCheckpoint::get(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("missing tensor ", name, " in ", dir_);
  return it->second.first->view(*it->second.second);
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& kv : index_) out.push_back(kv.first);
  return out;
}

void SafetensorsCheckpoint::release(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("missing tensor ", name, " in ", dir_);
  it->second.first->release(*it->second.second);
}

uint64_t SafetensorsCheckpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& kv : index_) n += kv.second.second->end - kv.second.second->begin;
  return n;
}

// ---------------------------------------------------------------- writer

void SafetensorsWriter::add(const std::string& name, DType dtype, const Shape& shape, const void* data) {
  if (name.empty()) fail("safetensors writer: empty tensor name");
  if (name == kMetadataKey) fail("safetensors writer: ", kMetadataKey, " is reserved, not a tensor name");
  if (names_.count(name)) fail("safetensors writer: duplicate tensor ", printable(name));
  uint64_t nbytes = 0;
  if (!checked_nbytes(shape, dtype_size(dtype), &nbytes))
    fail("safetensors writer: tensor ", printable(name), " has invalid shape ", shape_str(shape));
  if (nbytes > 0 && !data) fail("safetensors writer: tensor ", printable(name), " has no data");
  items_.push_back({name, dtype, shape, data});
  names_.insert(name);
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

uint64_t SafetensorsWriter::data_bytes() const {
  uint64_t n = 0;
  for (const auto& it : items_) n += uint64_t(numel(it.shape)) * dtype_size(it.dtype);
  return n;
}


void SafetensorsWriter::write(const std::string& path) const {
  // ordered_json keeps insertion order, so the header reads like the file.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header[kMetadataKey] = metadata_;
  uint64_t offset = 0;
  for (const auto& it : items_) {
    uint64_t nbytes = uint64_t(numel(it.shape)) * dtype_size(it.dtype);
    header[it.name] = {
        {"dtype", std::string(dtype_name(it.dtype))}, {"shape", it.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& ex) {
    fail("cannot write ", path, ": a tensor name or metadata string is not valid UTF-8 (", ex.what(), ")");
  }
  // Spaces after the JSON are valid and put the data section on an 8-byte boundary.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');

  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));

  AtomicFileWriter out(path);
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (const auto& it : items_) {
    size_t nbytes = size_t(numel(it.shape)) * dtype_size(it.dtype);
    if (nbytes) out.write(it.data, nbytes);
  }
  out.commit();
}

}  // namespace rinfer::io

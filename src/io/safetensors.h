#pragma once
// safetensors: reading (memory-mapped, zero-copy, every header field
// validated) and writing (to a temporary name, renamed when complete).
// Format: u64 little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data section; offsets are relative to the data section.
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace rinfer::io {

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`: header length within the file, header is a
  // JSON object, known dtypes, non-negative shapes, numel * dtype size ==
  // end - begin, spans inside the data section and not overlapping.
  // Any violation throws rinfer::Error naming the file and the problem.
  explicit SafetensorsFile(const std::string& path);
  // The same checks over bytes already in memory (the caller keeps them
  // alive while this object and its views live); `name` stands for the path
  // in messages. release() is then a no-op.
  SafetensorsFile(std::string name, std::span<const uint8_t> bytes);

  const std::string& path() const { return name_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* find(std::string_view name) const;
  TensorView view(const TensorEntry& e) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Drop the resident pages of one tensor (streaming conversion), or of its
  // bytes [from, from + len).
  void release(const TensorEntry& e) const;
  void release(const TensorEntry& e, size_t from, size_t len) const;

 private:
  void parse(const uint8_t* bytes, uint64_t size);

  std::string name_;
  MappedFile file_;  // empty for the in-memory form
  const uint8_t* bytes_ = nullptr;  // the whole file
  const uint8_t* data_section_ = nullptr;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory: model.safetensors, the shards listed
// in model.safetensors.index.json, or else every *.safetensors in the folder.
// A directory holding only pytorch_model*.bin / *.pt gets an error telling the
// user to provide safetensors.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(std::string_view name) const;
  const TensorEntry* find(std::string_view name) const;  // nullptr if absent
  // The tensor, or an Error "missing tensor NAME in DIR".
  TensorView get(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  void release(std::string_view name) const;
  uint64_t total_bytes() const;  // sum of tensor data sizes

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const TensorEntry*>, std::less<>> index_;
};

// Collects tensors (by pointer: the bytes must stay alive until write()) and
// writes one safetensors file. Tensors are written in insertion order, data
// aligned to 8 bytes. write() goes to PATH.tmp-<pid>-<n>, fsyncs and renames, so a
// crash never leaves a half-written PATH.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, const Shape& shape, const void* data);
  void set_metadata(const std::string& key, const std::string& value);
  void write(const std::string& path) const;
  uint64_t data_bytes() const;

 private:
  struct Item {
    std::string name;
    DType dtype;
    Shape shape;
    const void* data;
  };
  std::vector<Item> items_;
  std::set<std::string> names_;  // duplicate check without a scan per add()
  std::map<std::string, std::string> metadata_;
};

}  // namespace rinfer::io

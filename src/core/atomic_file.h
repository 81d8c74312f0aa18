#pragma once
// Outputs appear complete or not at all: everything is written under a
// temporary name in the same folder, fsynced, then renamed over the final
// path, so a crash or an error never leaves a half-written file behind.
#include <cstddef>
#include <string>

namespace rinfer {

void write_file_atomic(const std::string& path, const std::string& content);

// A file written piece by piece (large outputs: safetensors shards, GGUF).
// The temporary file is removed on every path but a successful commit().
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& final_path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);
  // fsync, close, rename to the final path, fsync the folder.
  void commit();

 private:
  std::string final_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace rinfer

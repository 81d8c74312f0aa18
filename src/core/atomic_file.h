#pragma once
// Outputs appear complete or not at all: everything is written under a
// temporary name in the same folder, fsynced, then renamed over the final
// path, so a crash or an error never leaves a half-written file behind.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

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

// A folder built under NAME.tmp-<pid> beside its final path and renamed
// into place by commit(); removed on every other path.
class StagingDir {
 public:
  // The final path must not exist; its parent must.
  explicit StagingDir(const std::filesystem::path& final_path);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return tmp_; }
  void commit();

 private:
  std::filesystem::path final_, tmp_;
  bool committed_ = false;
};

// Removes what a killed process left of its outputs to `final_path`: the
// temporaries NAME.tmp-<pid>[-<n>] beside it whose process no longer runs.
// Returns their names (for a note to the user).
std::vector<std::string> remove_stale_temporaries(const std::filesystem::path& final_path);

}  // namespace rinfer

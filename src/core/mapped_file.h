#pragma once
// MappedFile: a read-only memory map of a whole file. release() hands pages
// of a range back to the kernel, so streaming a large checkpoint through the
// converter keeps resident memory near one layer.
#include <cstddef>
#include <cstdint>
#include <string>

namespace rinfer {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drop the resident pages of [offset, offset + len) (MADV_DONTNEED); later
  // reads fault them in again from the file.
  void release(size_t offset, size_t len) const;

 private:
  void close();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rinfer

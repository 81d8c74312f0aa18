#pragma once
// Buffer: owned, 64-byte aligned anonymous memory. Large buffers are
// allocated with mmap and advised to use transparent huge pages: weights
// streamed from such memory decode markedly faster than from a file mapping.
#include <cstddef>
#include <cstdint>

namespace rinfer {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t nbytes, bool zero = false);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T> T* as() { return static_cast<T*>(data_); }
  template <typename T> const T* as() const { return static_cast<const T*>(data_); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void release();
  void* data_ = nullptr;
  size_t size_ = 0;
  bool mmapped_ = false;
};

}  // namespace rinfer

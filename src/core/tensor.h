#pragma once
// TensorView: a non-owning, typed, shaped window on bytes (a mapped file, a
// Buffer, a KV block). Row-major, contiguous. Ownership stays with whoever
// made the bytes, so views are cheap to pass around.
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace rinfer {

using Shape = std::vector<int64_t>;

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
std::string shape_str(const Shape& s);  // "[4096, 11008]"

struct TensorView {
  DType dtype = DType::F32;
  Shape shape;
  const void* data = nullptr;
  Device device = Device::Cpu;  // where data lives

  int64_t numel() const { return rinfer::numel(shape); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(data); }
};

}  // namespace rinfer

#include "core/buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace rinfer {

namespace {
constexpr size_t kHugeThreshold = size_t(4) << 20;  // below this, plain aligned_alloc
}

Buffer::Buffer(size_t nbytes, bool zero) : size_(nbytes) {
  if (nbytes == 0) return;
  if (nbytes >= kHugeThreshold) {
    void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("out of memory: cannot allocate ", nbytes, " bytes");
    madvise(p, nbytes, MADV_HUGEPAGE);
    data_ = p;
    mmapped_ = true;  // anonymous mmap memory is already zero
    return;
  }
  size_t rounded = (nbytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded);
  if (!data_) fail("out of memory: cannot allocate ", nbytes, " bytes");
  if (zero) std::memset(data_, 0, nbytes);
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!data_) return;
  if (mmapped_)
    munmap(data_, size_);
  else
    std::free(data_);
  data_ = nullptr;
  size_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), mmapped_(o.mmapped_) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mmapped_ = o.mmapped_;
  }
  return *this;
}

}  // namespace rinfer

#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace rinfer {

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFileWriter out(path);
  out.write(content.data(), content.size());
  out.commit();
}

AtomicFileWriter::AtomicFileWriter(const std::string& final_path) : final_(final_path) {
  static std::atomic<uint64_t> counter{0};
  tmp_ = str(final_path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);  // the umask applies
  if (fd_ < 0) fail("cannot write ", final_, ": cannot create ", tmp_, ": ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    // Linux writes at most ~2 GiB per call; loop on short writes and EINTR.
    ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write ", final_, ": ", std::strerror(errno));
    }
    p += w;
    n -= size_t(w);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) fail("cannot write ", final_, ": fsync: ", std::strerror(errno));
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot write ", final_, ": close: ", std::strerror(errno));
  if (::rename(tmp_.c_str(), final_.c_str()) != 0)
    fail("cannot write ", final_, ": rename from ", tmp_, ": ", std::strerror(errno));
  committed_ = true;
  // Make the rename itself durable; failing here loses nothing already written.
  std::filesystem::path parent = std::filesystem::path(final_).parent_path();
  int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace rinfer

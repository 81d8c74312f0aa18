#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
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
  remove_stale_temporaries(final_path);
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

namespace {
namespace fs = std::filesystem;

// The pid in "<name>.tmp-<pid>" or "<name>.tmp-<pid>-<n>", or 0.
pid_t temporary_owner(const std::string& file, const std::string& name) {
  const std::string prefix = name + ".tmp-";
  if (file.size() <= prefix.size() || file.compare(0, prefix.size(), prefix) != 0) return 0;
  const std::string rest = file.substr(prefix.size());
  const size_t dash = rest.find('-');
  const std::string pid = rest.substr(0, dash);
  auto digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 9 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(pid) || (dash != std::string::npos && !digits(rest.substr(dash + 1)))) return 0;
  return pid_t(std::stol(pid));
}
}  // namespace

std::vector<std::string> remove_stale_temporaries(const fs::path& final_path) {
  std::vector<std::string> removed;
  const fs::path parent = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  const std::string name = final_path.filename().string();
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = temporary_owner(it->path().filename().string(), name);
    // kill(pid, 0) fails with ESRCH only when no such process exists; our
    // own pid is a live writer of this process.
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (!rm) removed.push_back(it->path().filename().string());
  }
  return removed;
}

StagingDir::StagingDir(const fs::path& final_path) : final_(final_path) {
  for (const auto& name : remove_stale_temporaries(final_))
    std::fprintf(stderr, "rinfer: removed %s, left by an interrupted run\n", (final_.parent_path() / name).c_str());
  tmp_ = final_;
  tmp_ += ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp_);
  fs::create_directory(tmp_);
}

StagingDir::~StagingDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void StagingDir::commit() {
  fs::rename(tmp_, final_);
  committed_ = true;
}

}  // namespace rinfer

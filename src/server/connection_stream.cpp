#include "server/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace rinfer::server {

std::string socket_ip(int sock, bool local, int* port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int r = local ? ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                      : ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (port) *port = 0;
  if (r != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    if (port) *port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    if (port) *port = ntohs(a->sin6_port);
  }
  return text;
}

ConnectionStream::ConnectionStream(int sock, std::chrono::milliseconds io_timeout,
                                   std::chrono::milliseconds request_timeout)
    : sock_(sock), io_timeout_(io_timeout), request_timeout_(request_timeout) {}

int ConnectionStream::wait_readable(std::chrono::milliseconds t) const {
  pollfd p{sock_, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, int(std::max<int64_t>(0, t.count())));
  while (r < 0 && errno == EINTR);
  return r;
}

ssize_t ConnectionStream::fill() {
  ssize_t n;
  do n = ::recv(sock_, buf_, sizeof(buf_), 0);
  while (n < 0 && errno == EINTR);
  pos_ = 0;
  len_ = n > 0 ? size_t(n) : 0;
  return n;
}

void ConnectionStream::begin_request() {
  deadline_ = Clock::now() + request_timeout_;
  in_header_ = true;
  header_nul_ = false;
  newlines_ = 0;
}

void ConnectionStream::scan_header(const char* p, size_t n) {
  for (size_t i = 0; i < n && in_header_; ++i) {
    if (p[i] == '\0') header_nul_ = true;
    if (p[i] == '\n') {
      // The request line ends the first line; an empty line ends the headers.
      if (++newlines_ == 2) in_header_ = false;
    } else if (p[i] != '\r') {
      newlines_ = 0;
    }
  }
}

bool ConnectionStream::is_readable() const { return has_buffered() || wait_readable(io_timeout_) > 0; }

bool ConnectionStream::is_writable() const {
  pollfd p{sock_, POLLOUT, 0};
  int r;
  do r = ::poll(&p, 1, int(io_timeout_.count()));
  while (r < 0 && errno == EINTR);
  return r > 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (!has_buffered()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0 || wait_readable(std::min(left, io_timeout_)) <= 0 || fill() <= 0) return -1;
  }
  const size_t n = std::min(size, len_ - pos_);
  std::memcpy(ptr, buf_ + pos_, n);
  if (in_header_) scan_header(ptr, n);
  pos_ += n;
  return ssize_t(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  ssize_t n;
  do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const { ip = socket_ip(sock_, false, &port); }

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const { ip = socket_ip(sock_, true, &port); }

}  // namespace rinfer::server

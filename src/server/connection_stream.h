#pragma once
// ConnectionStream: one client connection as cpp-httplib reads and writes
// it, kept for the connection's whole life instead of one per request.
//  - Bytes read ahead stay buffered, so requests pipelined back to back are
//    answered in order (a per-request stream would drop them).
//  - A request must arrive whole within a deadline counted from its first
//    byte: a client trickling its headers cannot hold a thread for longer.
//  - Header bytes are checked for NUL, which httplib would cut a header
//    value at (a key followed by NUL and junk would compare equal).
#include <chrono>
#include <string>

#include <httplib.h>

namespace rinfer::server {

// The address of the peer (`local`: of this end) of a connected socket.
std::string socket_ip(int sock, bool local = false, int* port = nullptr);

class ConnectionStream : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  ConnectionStream(int sock, std::chrono::milliseconds io_timeout, std::chrono::milliseconds request_timeout);

  // Waits up to `idle` for the first byte of the next request (true), or
  // for the client to close or `stop()` to say so (false). Starts the
  // request's deadline.
  template <typename StopFn>
  bool next_request(std::chrono::milliseconds idle, StopFn stop) {
    const auto until = Clock::now() + idle;
    while (!has_buffered() && !stop()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0) return false;
      const int r = wait_readable(std::min(left, std::chrono::milliseconds(100)));
      if (r < 0) return false;
      if (r > 0 && fill() <= 0) return false;
    }
    if (!has_buffered()) return false;
    begin_request();
    return true;
  }
  // The current request's headers held a NUL byte.
  bool header_has_nul() const { return header_nul_; }
  // End the connection after this response: a request answered before its
  // body was read leaves bytes that are not a request.
  void close_after_response() { close_ = true; }
  bool closing() const { return close_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return sock_; }

 private:
  bool has_buffered() const { return pos_ < len_; }
  int wait_readable(std::chrono::milliseconds t) const;  // poll(): >0 readable, 0 timeout, <0 error
  ssize_t fill();                                         // one recv() into the empty buffer
  void begin_request();
  void scan_header(const char* p, size_t n);

  int sock_;
  std::chrono::milliseconds io_timeout_, request_timeout_;
  Clock::time_point deadline_{};
  char buf_[16384];
  size_t pos_ = 0, len_ = 0;
  bool in_header_ = false, header_nul_ = false, close_ = false;
  int newlines_ = 0;  // consecutive line ends seen in the header ("\r" skipped)
};

}  // namespace rinfer::server

#pragma once
// ConnectionLimiter: how many connections the server holds at once, in all
// and per client address. Each held connection owns a thread, so these caps
// are what keeps clients that open many slow connections from taking every
// thread; beyond them a connection gets 503 at once.
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace rinfer::server {

class ConnectionLimiter {
 public:
  ConnectionLimiter(size_t max_total, size_t max_per_client) : max_total_(max_total), max_per_client_(max_per_client) {}

  // A held connection; releases its place when destroyed.
  class Slot {
   public:
    Slot(ConnectionLimiter* owner, std::string client) : owner_(owner), client_(std::move(client)) {}
    Slot(Slot&& o) noexcept : owner_(o.owner_), client_(std::move(o.client_)) { o.owner_ = nullptr; }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (owner_) owner_->release(client_);
    }

   private:
    ConnectionLimiter* owner_;
    std::string client_;
  };

  // A place for a connection from `client`, or nothing when a cap is reached.
  std::optional<Slot> acquire(const std::string& client);

 private:
  void release(const std::string& client);

  size_t max_total_, max_per_client_;
  std::mutex mu_;
  size_t total_ = 0;
  std::map<std::string, size_t> per_client_;
};

}  // namespace rinfer::server

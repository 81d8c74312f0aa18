#include "server/connection_limiter.h"

namespace rinfer::server {

std::optional<ConnectionLimiter::Slot> ConnectionLimiter::acquire(const std::string& client) {
  std::lock_guard<std::mutex> lk(mu_);
  size_t& mine = per_client_[client];
  if (total_ >= max_total_ || mine >= max_per_client_) {
    if (mine == 0) per_client_.erase(client);
    return std::nullopt;
  }
  ++total_;
  ++mine;
  return std::optional<Slot>(std::in_place, this, client);
}

void ConnectionLimiter::release(const std::string& client) {
  std::lock_guard<std::mutex> lk(mu_);
  --total_;
  auto it = per_client_.find(client);
  if (--it->second == 0) per_client_.erase(it);
}

}  // namespace rinfer::server

// Clients that misbehave at the connection level: slow senders (a
// slow-header attack from one address and from many), too many connections,
// pipelined requests, NUL bytes in headers, and clients that go away.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server_test_util.h"

namespace rinfer::test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A TCP connection to the server from `source` (any 127.x.y.z: all of
// 127/8 is loopback on Linux, so each source is another client address).
int dial(int port, const std::string& source = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &a.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  a.sin_port = htons(uint16_t(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size());
}

// Reads until the peer closes or `timeout` passes.
std::string read_until_close(int fd, double timeout_s) {
  std::string out;
  const auto t0 = Clock::now();
  char buf[8192];
  while (seconds_since(t0) < timeout_s) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

// The attack needs ~2 descriptors per connection in this one process.
void ensure_descriptors(rlim_t want) {
  rlimit r{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &r), 0);
  if (r.rlim_cur < want) {
    r.rlim_cur = std::min(want, r.rlim_max);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &r), 0);
  }
  ASSERT_GE(r.rlim_cur, want) << "this test needs " << want << " open files (ulimit -n)";
}

// Slow-header attackers: connections that each sent the start of a request
// and then trickle one more byte per second.
class Trickler {
 public:
  void add(int fd) { fds_.push_back(fd); }
  size_t size() const { return fds_.size(); }
  void start() {
    for (int fd : fds_) send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    thread_ = std::thread([this] {
      while (!stop_) {
        for (int fd : fds_) send_all(fd, "a");
        for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  // How many of the connections the server has closed (a read gives EOF or
  // a reset); `answered_503` counts those that got a 503 first.
  size_t closed_by_server(size_t* answered_503) const {
    size_t closed = 0;
    for (int fd : fds_) {
      char buf[512];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0 && std::string(buf, size_t(n)).rfind("HTTP/1.1 503", 0) == 0) ++*answered_503;
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;
    }
    return closed;
  }
  ~Trickler() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) ::close(fd);
  }

 private:
  std::vector<int> fds_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

// /health and a short completion from a well-behaved client, each timed.
void expect_served_quickly(const TestServer& s) {
  auto t0 = Clock::now();
  auto c = s.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h) << "no answer to /health";
  EXPECT_EQ(h->status, 200);
  EXPECT_LT(seconds_since(t0), 2.0) << "/health";
  t0 = Clock::now();
  auto r = s.post("/v1/completions", {{"model", "m"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_LT(seconds_since(t0), 2.0) << "completion";
}

TEST(ServerConnections, SlowHeaderAttackFromOneAddressHitsItsCap) {
  ensure_descriptors(4096);
  TestServerOptions o;
  o.http.request_timeout_s = 60;  // the caps, not the deadline, are under test here
  TestServer s(o);
  Trickler attack;
  for (int i = 0; i < 500; ++i) {
    const int fd = dial(s.port(), "127.0.0.2");
    ASSERT_GE(fd, 0) << "connection " << i;
    attack.add(fd);
  }
  attack.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  expect_served_quickly(s);
  size_t refused = 0;
  const size_t closed = attack.closed_by_server(&refused);
  // 256 held (the per-client default), the rest refused with a 503.
  EXPECT_EQ(refused, 500 - s.http_options().max_connections_per_client);
  EXPECT_EQ(closed, refused);
  EXPECT_EQ(s.metric("rinfer_requests_rejected_total{status=\"503\"}"), double(refused));
}

TEST(ServerConnections, SlowHeaderAttackFromManyAddressesIsCutByTheDeadline) {
  ensure_descriptors(4096);
  TestServerOptions o;
  o.http.request_timeout_s = 3;
  TestServer s(o);
  Trickler attack;
  for (int i = 0; i < 500; ++i) {
    const std::string source = "127.0." + std::to_string(1 + i / 200) + "." + std::to_string(1 + i % 200);
    const int fd = dial(s.port(), source);
    ASSERT_GE(fd, 0) << "connection from " << source;
    attack.add(fd);
  }
  const auto t0 = Clock::now();
  attack.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  expect_served_quickly(s);
  size_t refused = 0;
  EXPECT_EQ(attack.closed_by_server(&refused), 0u) << "none is over a cap, and none is past its deadline yet";
  EXPECT_EQ(refused, 0u);
  // Each still trickles, but its request did not arrive within 3 s of its
  // first byte: the server drops it.
  while (seconds_since(t0) < 4.5) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(attack.closed_by_server(&refused), attack.size());
  expect_served_quickly(s);
}

TEST(ServerConnections, TotalAndPerClientCapsAnswer503WithRetryAfter) {
  TestServerOptions o;
  o.http.max_connections = 3;
  o.http.max_connections_per_client = 2;
  TestServer s(o);
  std::vector<int> held;
  held.push_back(dial(s.port(), "127.0.0.1"));
  held.push_back(dial(s.port(), "127.0.0.1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both taken up by the server
  const int third = dial(s.port(), "127.0.0.1");
  const std::string r1 = read_until_close(third, 5);
  EXPECT_EQ(r1.rfind("HTTP/1.1 503", 0), 0u) << r1;
  EXPECT_NE(r1.find("Retry-After: 1"), std::string::npos) << r1;
  EXPECT_NE(r1.find("server_overloaded"), std::string::npos) << r1;
  held.push_back(dial(s.port(), "127.0.0.2"));  // another client: within the total
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int fourth = dial(s.port(), "127.0.0.3");  // over the total
  EXPECT_EQ(read_until_close(fourth, 5).rfind("HTTP/1.1 503", 0), 0u);
  for (int fd : held) ::close(fd);
  ::close(third);
  ::close(fourth);
  // The places are given back once those connections end.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  expect_served_quickly(s);
}

TEST(ServerConnections, PipelinedRequestsAreAnsweredInOrder) {
  TestServer s;
  const std::string body = nlohmann::json{{"model", "m"}, {"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0}}.dump();
  const int fd = dial(s.port());
  ASSERT_GE(fd, 0);
  // Three requests in one write; the last asks the server to close after it.
  ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
                           "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const auto t0 = Clock::now();
  const std::string all = read_until_close(fd, 10);
  ::close(fd);
  EXPECT_LT(seconds_since(t0), 3.0) << "pipelined requests waited for a timeout";
  const size_t health = all.find("{\"status\":\"ok\"}"), completion = all.find("\"text_completion\""),
               models = all.find("\"object\":\"list\"");
  ASSERT_NE(health, std::string::npos) << all;
  ASSERT_NE(completion, std::string::npos) << all;
  ASSERT_NE(models, std::string::npos) << all;
  EXPECT_LT(health, completion);
  EXPECT_LT(completion, models);
  size_t responses = 0;
  for (size_t p = 0; (p = all.find("HTTP/1.1 200 OK", p)) != std::string::npos; ++p) ++responses;
  EXPECT_EQ(responses, 3u);
}

TEST(ServerConnections, NulBytesInHeadersAre400) {
  TestServerOptions o;
  o.http.api_key = "secret";
  TestServer s(o);
  auto ask = [&](const std::string& headers) {
    const int fd = dial(s.port());
    send_all(fd, "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + headers + "Connection: close\r\n\r\n");
    const std::string r = read_until_close(fd, 5);
    ::close(fd);
    return r.substr(0, r.find("\r\n"));
  };
  using namespace std::string_literals;
  EXPECT_EQ(ask("Authorization: Bearer secret\r\n"), "HTTP/1.1 200 OK");
  // httplib keeps a header value only up to a NUL: this key would pass.
  EXPECT_EQ(ask("Authorization: Bearer secret\0junk\r\n"s), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(ask("Authorization: Bearer secret\r\nX-Other: a\0b\r\n"s), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(ask("Authorization: Bearer secret\r\nX-\0Name: v\r\n"s), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(ask("Authorization: Bearer sec\0ret\r\n"s), "HTTP/1.1 400 Bad Request");
  // /health has no key, but the same rule.
  const int fd = dial(s.port());
  send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-A: \0\r\nConnection: close\r\n\r\n"s);
  EXPECT_EQ(read_until_close(fd, 5).rfind("HTTP/1.1 400", 0), 0u);
  ::close(fd);
}

TEST(ServerConnections, ClientsThatGoAwayAreCountedAsCancelled) {
  TestServer s;
  auto finished = [&](const char* reason) {
    return s.metric(std::string("rinfer_requests_finished_total{finish_reason=\"") + reason + "\"}");
  };
  std::vector<std::thread> ts;
  const int n_stream = 8, n_plain = 4, max_tokens = 400;
  for (int i = 0; i < n_stream + n_plain; ++i)
    ts.emplace_back([&, i] {
      const bool stream = i < n_stream;
      httplib::Client c("127.0.0.1", s.port());
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = nlohmann::json{{"model", "m"},        {"prompt", "Once upon a time " + std::to_string(i)},
                                {"max_tokens", max_tokens}, {"ignore_eos", true},
                                {"stream", stream}}
                     .dump();
      req.set_header("Content-Type", "application/json");
      int events = 0;
      if (stream)
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++events < 3; };
      else
        c.set_read_timeout(0, 20000);  // gives up waiting for the whole answer
      c.send(req);
    });
  for (auto& t : ts) t.join();
  // Every request is counted once it ends, those whose client left too.
  double total = 0;
  for (int i = 0; i < 200; ++i) {
    total = finished("stop") + finished("length") + finished("cancelled") + finished("error");
    if (total == n_stream + n_plain) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(total, n_stream + n_plain);
  // Not all ran to the end, and those that did not are the cancelled ones.
  const double tokens = s.metric("rinfer_generation_tokens_total");
  EXPECT_LT(tokens, (n_stream + n_plain) * max_tokens);
  EXPECT_GE(finished("cancelled"), 1);
  EXPECT_EQ(finished("length") + finished("cancelled"), n_stream + n_plain);
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

TEST(ServerConnections, ARequestArrivingSlowlyWithinTheDeadlineIsServed) {
  TestServerOptions o;
  o.http.request_timeout_s = 5;
  TestServer s(o);
  const int fd = dial(s.port());
  const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (size_t i = 0; i < req.size(); i += 8) {
    send_all(fd, req.substr(i, 8));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(read_until_close(fd, 5).find("{\"status\":\"ok\"}"), std::string::npos);
  ::close(fd);
}

}  // namespace
}  // namespace rinfer::test

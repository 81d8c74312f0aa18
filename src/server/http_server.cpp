#include "server/http_server.h"

#include <chrono>
#include <ctime>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/completion_session.h"
#include "server/connection_limiter.h"
#include "server/connection_stream.h"
#include "server/growing_task_queue.h"
#include "server/openai_protocol.h"

namespace rinfer::server {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {
constexpr auto kPoll = 100ms;
// Silence longer than this gets a keep-alive write, which is also how a
// client that went away is noticed while its request waits or thinks.
constexpr auto kHeartbeat = 1s;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                const std::string& param = "", const std::string& code = "") {
  res.status = status;
  res.set_content(error_body(message, type, param, code), "application/json");
}

// Constant time in the key's contents, so it cannot be guessed byte by
// byte from response times.
bool same_key(const std::string& given, const std::string& key) {
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= (unsigned char)(given[i] ^ key[i]);
  return diff == 0;
}
}  // namespace

// The connection loop is ours, not httplib's: one ConnectionStream for the
// connection's whole life (pipelining, the request deadline, NUL in
// headers), and the connection caps before any byte is read. httplib still
// parses each request and runs the routes (process_request).
class HttpServer::Listener : public httplib::Server {
 public:
  Listener(const ServerOptions& opts, Metrics& metrics)
      : opts_(opts), metrics_(metrics), limiter_(opts.max_connections, opts.max_connections_per_client) {}

  // Debian's cpp-httplib listens with a backlog of 5: a burst of clients
  // connecting at once would see SYNs dropped and retry a second later.
  // Linux lets listen() be called again to raise it.
  void raise_backlog(int n) { ::listen(svr_sock_, n); }

  // The connection of the request this thread is handling.
  static ConnectionStream* current() { return current_; }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool ok = false;
    if (auto slot = limiter_.acquire(socket_ip(sock))) {
      ok = serve_connection(sock);
    } else {
      refuse(sock);
      metrics_.count_rejected(503);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  bool serve_connection(int sock) {
    // Streams are many small writes (chunk header, data, trailer): Nagle's
    // algorithm would hold them back for the client's delayed ACK (~40 ms).
    const int one = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ConnectionStream strm(sock, std::chrono::seconds(read_timeout_sec_), to_ms(opts_.request_timeout_s));
    current_ = &strm;
    bool ok = false;
    for (size_t left = keep_alive_max_count_; left > 0; --left) {
      if (!strm.next_request(to_ms(opts_.idle_timeout_s), [this] { return svr_sock_ == INVALID_SOCKET; })) break;
      bool closed = false;
      ok = process_request(strm, left == 1, closed, nullptr);
      if (!ok || closed || strm.closing()) break;
    }
    current_ = nullptr;
    return ok;
  }

  static void refuse(int sock) {
    const std::string body = error_body("too many connections; try again later", "server_error", "", "server_overloaded");
    const std::string msg = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                            "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    // Best effort: the socket is fresh, so this fits its send buffer.
    (void)::send(sock, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  static std::chrono::milliseconds to_ms(double s) { return std::chrono::milliseconds(int64_t(s * 1000)); }

  const ServerOptions& opts_;
  Metrics& metrics_;
  ConnectionLimiter limiter_;
  static thread_local ConnectionStream* current_;
};

thread_local ConnectionStream* HttpServer::Listener::current_ = nullptr;

HttpServer::HttpServer(Engine& engine, const Tokenizer& tokenizer, std::vector<int32_t> eos_ids, ServerOptions opts)
    : engine_(engine), tokenizer_(tokenizer), eos_ids_(std::move(eos_ids)), opts_(std::move(opts)),
      started_(int64_t(std::time(nullptr))) {
  RINFER_CHECK(opts_.max_connections >= 1 && opts_.max_connections_per_client >= 1,
               "connection caps must be at least 1");
  RINFER_CHECK(opts_.request_timeout_s > 0 && opts_.idle_timeout_s > 0, "server timeouts must be positive");
  http_ = std::make_unique<Listener>(opts_, metrics_);
  // A thread for every connection held, and a few more that answer 503 to
  // those beyond the caps.
  const size_t threads = opts_.max_connections + 8;
  http_->new_task_queue = [threads] { return new GrowingTaskQueue(threads); };
  http_->set_payload_max_length(opts_.max_body_bytes);
  http_->set_keep_alive_max_count(1000);
  routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  int port = opts_.port == 0 ? http_->bind_to_any_port(opts_.host) : (http_->bind_to_port(opts_.host, opts_.port) ? opts_.port : -1);
  RINFER_CHECK(port > 0, "cannot listen on ", opts_.host, ":", opts_.port, " (address in use or not local?)");
  http_->raise_backlog(1024);
  return port;
}

void HttpServer::serve() { http_->listen_after_bind(); }

void HttpServer::stop() {
  stopping_ = true;
  if (http_) http_->stop();
}

void HttpServer::routes() {
  auto& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    ConnectionStream* conn = Listener::current();
    if (conn && conn->header_has_nul()) {
      send_error(res, 400, "request headers must not contain NUL bytes", "invalid_request_error");
      metrics_.count_rejected(400);
      conn->close_after_response();
      return httplib::Server::HandlerResponse::Handled;
    }
    if (opts_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), opts_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, "invalid or missing API key (send 'Authorization: Bearer KEY')", "invalid_request_error", "",
               "invalid_api_key");
    metrics_.count_rejected(401);
    if (conn) conn->close_after_response();
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404 no route, 413 body too large, 400
  // unparsable HTTP) get an error object too.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                      : res.status == 413 ? "the request body is larger than " + std::to_string(opts_.max_body_bytes) + " bytes"
                      : res.status == 405 ? "method not allowed"
                                          : "bad request";
    if (res.status == 413) metrics_.count_rejected(413);
    // What follows an unread body or a malformed request is not a request.
    if ((res.status == 413 || res.status == 400) && Listener::current()) Listener::current()->close_after_response();
    send_error(res, res.status, msg, "invalid_request_error");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    send_error(res, 500, msg, "server_error");
  });

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(engine_.stats()), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", opts_.model_name},
              {"object", "model"},
              {"created", started_},
              {"owned_by", "rinfer"},
              {"max_model_len", engine_.max_model_len()}};
    res.set_content(dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req.body, /*chat=*/false, &res);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req.body, /*chat=*/true, &res);
  });
}

void HttpServer::completion(const std::string& body, bool chat, void* res_ptr) {
  auto& res = *static_cast<httplib::Response*>(res_ptr);
  std::shared_ptr<CompletionSession> session;
  try {
    SessionContext ctx{engine_,  tokenizer_, metrics_, opts_.model_name, eos_ids_, opts_.max_tokens_limit,
                       opts_.chat_template};
    session = std::make_shared<CompletionSession>(ctx, parse_completion_request(body, chat, opts_.max_n));
    session->start();
  } catch (const ApiError& e) {
    send_error(res, e.status, e.what(), e.type, e.param, e.code);
    if (e.status == 503) res.set_header("Retry-After", "1");
    metrics_.count_rejected(e.status);
    return;
  }
  // Both kinds of response are written by a chunked provider running on
  // this connection's thread: it waits for the engine's events and notices
  // a client that went away when a write fails, cancelling the request.
  auto releaser = [session](bool) { session->abandon(); };
  if (session->stream()) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, session](size_t, httplib::DataSink& sink) {
          auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          auto last_write = std::chrono::steady_clock::now();
          while (!session->done()) {
            if (stopping_) session->cancel();
            std::vector<json> chunks;
            session->poll(kPoll, &chunks);
            for (const auto& c : chunks)
              if (!send("data: " + dump(c) + "\n\n")) return false;
            if (!chunks.empty()) {
              last_write = std::chrono::steady_clock::now();
            } else if (std::chrono::steady_clock::now() - last_write > kHeartbeat) {
              if (!send(": keep-alive\n\n")) return false;  // an SSE comment: clients skip it
              last_write = std::chrono::steady_clock::now();
            }
          }
          if (!session->error().empty() && !send("data: " + error_body(session->error(), "server_error") + "\n\n"))
            return false;
          if (session->include_usage() && !send("data: " + dump(session->usage_chunk()) + "\n\n")) return false;
          send("data: [DONE]\n\n");
          sink.done();
          return true;
        },
        releaser);
  } else {
    res.set_chunked_content_provider(
        "application/json",
        [this, session](size_t, httplib::DataSink& sink) {
          auto last_write = std::chrono::steady_clock::now();
          while (!session->done()) {
            if (stopping_) session->cancel();
            if (session->poll(kPoll, nullptr)) continue;
            if (std::chrono::steady_clock::now() - last_write > kHeartbeat) {
              // Whitespace before a JSON value is still the same JSON.
              if (!sink.write(" ", 1)) return false;
              last_write = std::chrono::steady_clock::now();
            }
          }
          const std::string out = session->error().empty() ? dump(session->response()) + "\n"
                                                           : error_body(session->error(), "server_error") + "\n";
          sink.write(out.data(), out.size());
          sink.done();
          return true;
        },
        releaser);
  }
}

}  // namespace rinfer::server

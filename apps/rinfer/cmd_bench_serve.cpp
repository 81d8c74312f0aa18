// rinfer bench-serve: load a running `rinfer serve` (or any OpenAI-compatible
// server) and measure it: a closed-loop concurrency sweep (C clients, each
// sending its next request when the last one ends) and/or an open-loop
// Poisson arrival rate. Reports requests/s, output tokens/s and TTFT, TPOT
// and inter-token latency percentiles, as a table and JSON; from a rinfer
// server also the engine steps and speculative acceptance of each run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"

namespace rinfer::cli {

namespace {
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
  std::string url = "http://127.0.0.1:8000", api_key, model, concurrency = "1,4,16,64", json_path;
  double request_rate = 0;  // requests/s, open loop; 0: no open-loop run
  int64_t num_prompts = 200, input_len = 128, output_len = 128, shared_prefix_len = 0, seed = 0;
  int64_t vocab_low = 10, vocab_high = 500;
};

struct RequestResult {
  bool ok = false;
  std::string error;
  double ttft = 0, e2e = 0;
  int64_t output_tokens = 0;
  std::vector<double> itl;  // gaps between streamed chunks after the first
};

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Prompts of exactly input_len token ids (sent as ids, so no tokenizer is
// involved); the first shared_prefix_len are the same in every prompt.
std::vector<std::vector<int32_t>> make_prompts(const BenchServeOptions& o) {
  std::mt19937_64 rng(uint64_t(o.seed));
  std::uniform_int_distribution<int32_t> id(int32_t(o.vocab_low), int32_t(o.vocab_high - 1));
  std::vector<int32_t> prefix(size_t(std::min(o.shared_prefix_len, o.input_len)));
  for (auto& t : prefix) t = id(rng);
  std::vector<std::vector<int32_t>> prompts(size_t(o.num_prompts));
  for (auto& p : prompts) {
    p = prefix;
    while (int64_t(p.size()) < o.input_len) p.push_back(id(rng));
  }
  return prompts;
}

std::unique_ptr<httplib::Client> make_client(const BenchServeOptions& o) {
  auto cli = std::make_unique<httplib::Client>(o.url);
  cli->set_read_timeout(600, 0);
  cli->set_connection_timeout(10, 0);
  cli->set_keep_alive(true);  // a closed-loop client reuses its connection, as real ones do
  cli->set_tcp_nodelay(true);  // else Nagle delays the request body behind its headers
  return cli;
}

RequestResult send_one(httplib::Client& cli, const BenchServeOptions& o, const std::vector<int32_t>& prompt) {
  RequestResult r;
  json body = {{"model", o.model},     {"prompt", prompt},  {"max_tokens", o.output_len}, {"temperature", 0},
               {"ignore_eos", true},   {"stream", true},    {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  const auto t0 = Clock::now();
  double last = 0;
  std::string buf;
  bool first = true;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data: ", 0) != 0) continue;  // keep-alive comments
      const std::string payload = ev.substr(6);
      if (payload == "[DONE]") continue;
      json j = parse_json_or_discarded(payload);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        r.error = j["error"].value("message", "error");
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) r.output_tokens = j["usage"].value("completion_tokens", 0);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const std::string text = j["choices"][0].value("text", "");
      if (text.empty()) continue;
      const double now = since(t0);
      if (first) {
        r.ttft = now;
        first = false;
      } else {
        r.itl.push_back(now - last);
      }
      last = now;
    }
    return true;
  };
  auto res = cli.send(req);
  r.e2e = since(t0);
  if (!res) {
    r.error = "HTTP error: " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    r.error = "HTTP " + std::to_string(res->status) + ": " + res->body;
  } else if (r.error.empty()) {
    r.ok = r.output_tokens > 0;
    if (!r.ok) r.error = "no tokens in the response";
  }
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(rank), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

json summarize(const std::string& mode, double level, const std::vector<RequestResult>& rs, double duration) {
  std::vector<double> ttft, tpot, itl;
  int64_t ok = 0, out_tokens = 0;
  std::string first_error;
  for (const auto& r : rs) {
    if (!r.ok) {
      if (first_error.empty()) first_error = r.error;
      continue;
    }
    ++ok;
    out_tokens += r.output_tokens;
    ttft.push_back(r.ttft * 1e3);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / double(r.output_tokens - 1) * 1e3);
    for (double g : r.itl) itl.push_back(g * 1e3);
  }
  auto pct = [](const std::vector<double>& v) {
    double mean = v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    return json{{"mean", mean}, {"p50", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)}};
  };
  json j = {{"mode", mode},
            {mode == "closed" ? "concurrency" : "request_rate", level},
            {"completed", ok},
            {"failed", int64_t(rs.size()) - ok},
            {"duration_s", duration},
            {"requests_per_s", double(ok) / duration},
            {"output_tokens_per_s", double(out_tokens) / duration},
            {"ttft_ms", pct(ttft)},
            {"tpot_ms", pct(tpot)},
            {"itl_ms", pct(itl)}};
  if (!first_error.empty()) j["first_error"] = first_error;
  return j;
}

json run_closed(const BenchServeOptions& o, const std::vector<std::vector<int32_t>>& prompts, int64_t conc) {
  std::vector<RequestResult> rs(prompts.size());
  std::atomic<size_t> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int64_t c = 0; c < conc; ++c)
    ts.emplace_back([&] {
      auto cli = make_client(o);
      for (size_t i; (i = next++) < prompts.size();) rs[i] = send_one(*cli, o, prompts[i]);
    });
  for (auto& t : ts) t.join();
  return summarize("closed", double(conc), rs, since(t0));
}

json run_open(const BenchServeOptions& o, const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<RequestResult> rs(prompts.size());
  std::mt19937_64 rng(uint64_t(o.seed) + 1);
  std::exponential_distribution<double> gap(o.request_rate);
  const auto t0 = Clock::now();
  double at = 0;
  std::vector<std::thread> ts;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at)));
    ts.emplace_back([&, i] { rs[i] = send_one(*make_client(o), o, prompts[i]); });
    at += gap(rng);
  }
  for (auto& t : ts) t.join();
  return summarize("open", o.request_rate, rs, since(t0));
}

// The engine counters a run changes, from a rinfer server's /metrics (none
// from servers without them): speculative drafts and acceptance, engine
// steps and tokens generated.
std::map<std::string, double> server_counters(const BenchServeOptions& o) {
  std::map<std::string, double> out;
  httplib::Client cli(o.url);
  cli.set_connection_timeout(5, 0);
  httplib::Headers h;
  if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
  auto res = cli.Get("/metrics", h);
  if (!res || res->status != 200) return out;
  for (const char* name : {"rinfer_spec_decode_draft_tokens_total", "rinfer_spec_decode_accepted_tokens_total",
                           "rinfer_engine_steps_total", "rinfer_generation_tokens_total"}) {
    const std::string key = std::string(name) + " ";
    for (size_t pos = 0; (pos = res->body.find(key, pos)) != std::string::npos; pos += key.size())
      if (pos == 0 || res->body[pos - 1] == '\n') {
        out[name] = std::strtod(res->body.c_str() + pos + key.size(), nullptr);
        break;
      }
  }
  return out;
}

// Adds to a run's summary what the server counted during it.
void add_counters(json& run, const std::map<std::string, double>& before, const std::map<std::string, double>& after) {
  auto delta = [&](const char* name) {
    const auto a = after.find(name), b = before.find(name);
    return a != after.end() && b != before.end() ? a->second - b->second : -1.0;
  };
  const double steps = delta("rinfer_engine_steps_total"), gen = delta("rinfer_generation_tokens_total");
  if (steps > 0 && gen >= 0) run["server"] = {{"engine_steps", steps}, {"tokens_per_step", gen / steps}};
  const double drafted = delta("rinfer_spec_decode_draft_tokens_total");
  const double accepted = delta("rinfer_spec_decode_accepted_tokens_total");
  if (drafted > 0)
    run["speculative"] = {{"drafted", drafted}, {"accepted", accepted}, {"acceptance", accepted / drafted}};
}

void print_row(const json& r) {
  const bool closed = r["mode"] == "closed";
  std::printf("%-6s %8.2f %6lld %5lld %9.2f %10.1f %9.1f %9.1f %9.1f %8.2f %8.2f %8.2f %8.2f\n",
              closed ? "conc" : "rate", closed ? r["concurrency"].get<double>() : r["request_rate"].get<double>(),
              (long long)r["completed"].get<int64_t>(), (long long)r["failed"].get<int64_t>(),
              r["requests_per_s"].get<double>(), r["output_tokens_per_s"].get<double>(),
              r["ttft_ms"]["p50"].get<double>(), r["ttft_ms"]["p90"].get<double>(), r["ttft_ms"]["p99"].get<double>(),
              r["tpot_ms"]["p50"].get<double>(), r["tpot_ms"]["p99"].get<double>(), r["itl_ms"]["p50"].get<double>(),
              r["itl_ms"]["p99"].get<double>());
  if (r.contains("speculative"))
    std::printf("       speculative: %.0f drafts, %.1f %% accepted; %.2f tokens per engine step\n",
                r["speculative"]["drafted"].get<double>(), 100 * r["speculative"]["acceptance"].get<double>(),
                r.contains("server") ? r["server"]["tokens_per_step"].get<double>() : 0.0);
  std::fflush(stdout);
}
}  // namespace

Runner add_bench_serve(CLI::App& app) {
  auto o = std::make_shared<BenchServeOptions>();
  auto* cmd = app.add_subcommand("bench-serve", "Benchmark a running server: concurrency sweep and request rate");
  cmd->add_option("--url", o->url, "Server base URL");
  cmd->add_option("--api-key", o->api_key, "Bearer key, when the server wants one");
  cmd->add_option("--model", o->model, "Model name to send (default: the first of /v1/models)");
  cmd->add_option("--concurrency", o->concurrency, "Closed-loop client counts, comma-separated ('' for none)");
  cmd->add_option("--request-rate", o->request_rate, "Open-loop Poisson arrivals per second (0: no open-loop run)")
      ->check(number_in(0, 1e6));
  cmd->add_option("--num-prompts", o->num_prompts, "Requests per run")->check(integer_in(1, 1000000));
  cmd->add_option("--input-len", o->input_len, "Prompt tokens")->check(integer_in(1));
  cmd->add_option("--output-len", o->output_len, "Generated tokens (EOS ignored)")->check(integer_in(1));
  cmd->add_option("--shared-prefix-len", o->shared_prefix_len,
                  "Leading prompt tokens shared by every request (a system prompt; shows prefix caching)")
      ->check(integer_in(0));
  cmd->add_option("--seed", o->seed, "Seed of the random prompts")->check(integer_in(0));
  cmd->add_option("--vocab-range", o->vocab_high, "Prompt token ids are drawn from [10, N)")->check(integer_in(11));
  cmd->add_option("--json", o->json_path, "Write the results here");
  return [o]() -> int {
    std::vector<int64_t> levels = {};
    for (int32_t c : parse_ids(o->concurrency)) {
      RINFER_CHECK(c >= 1, "--concurrency: levels must be >= 1");
      levels.push_back(c);
    }
    RINFER_CHECK(!levels.empty() || o->request_rate > 0, "nothing to run: give --concurrency or --request-rate");
    {
      httplib::Client cli(o->url);
      cli.set_connection_timeout(5, 0);
      httplib::Headers h;
      if (!o->api_key.empty()) h.emplace("Authorization", "Bearer " + o->api_key);
      auto res = cli.Get("/v1/models", h);
      RINFER_CHECK(res && res->status == 200, "cannot reach ", o->url, "/v1/models",
                   res ? " (HTTP " + std::to_string(res->status) + ")" : " (" + httplib::to_string(res.error()) + ")");
      if (o->model.empty()) {
        json j = parse_json_or_discarded(res->body);
        RINFER_CHECK(!j.is_discarded() && j.contains("data") && !j["data"].empty(), "/v1/models lists no model");
        o->model = j["data"][0].value("id", "");
      }
    }
    const auto prompts = make_prompts(*o);
    std::printf("bench-serve %s model %s: %lld prompts x %lld input tokens (%lld shared) -> %lld output tokens\n",
                o->url.c_str(), o->model.c_str(), (long long)o->num_prompts, (long long)o->input_len,
                (long long)std::min(o->shared_prefix_len, o->input_len), (long long)o->output_len);
    std::printf("%-6s %8s %6s %5s %9s %10s %9s %9s %9s %8s %8s %8s %8s\n", "mode", "level", "ok", "fail", "req/s",
                "out tok/s", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p99");
    json runs = json::array();
    int64_t failed = 0;
    for (int64_t c : levels) {
      const auto before = server_counters(*o);
      runs.push_back(run_closed(*o, prompts, c));
      add_counters(runs.back(), before, server_counters(*o));
      print_row(runs.back());
      failed += runs.back()["failed"].get<int64_t>();
    }
    if (o->request_rate > 0) {
      const auto before = server_counters(*o);
      runs.push_back(run_open(*o, prompts));
      add_counters(runs.back(), before, server_counters(*o));
      print_row(runs.back());
      failed += runs.back()["failed"].get<int64_t>();
    }
    std::printf("(latencies in ms)\n");
    if (!o->json_path.empty()) {
      json out = {{"url", o->url},
                  {"model", o->model},
                  {"num_prompts", o->num_prompts},
                  {"input_len", o->input_len},
                  {"output_len", o->output_len},
                  {"shared_prefix_len", o->shared_prefix_len},
                  {"runs", runs}};
      write_file_atomic(o->json_path, out.dump(2) + "\n");
    }
    for (const auto& r : runs)
      if (r.contains("first_error")) std::fprintf(stderr, "rinfer bench-serve: first failure: %s\n",
                                                  r["first_error"].get<std::string>().c_str());
    RINFER_CHECK(failed == 0, failed, " requests failed");
    return 0;
  };
}

}  // namespace rinfer::cli

// rinfer serve: the OpenAI-compatible HTTP server over the batching engine.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tokenizer/chat_template.h"
#include "common.h"
#include "core/error.h"
#include "core/json_file.h"
#include "runtime/engine.h"
#include "server/http_server.h"

namespace rinfer::cli {

namespace {
bool has_chat_template(const std::string& dir) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(dir) / "chat_template.jinja")) return true;
  const fs::path cfg = fs::path(dir) / "tokenizer_config.json";
  if (!fs::exists(cfg)) return false;
  std::ifstream in(cfg, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  if (json_depth(text) > kMaxJsonDepth) return true;  // ChatTemplate::load then says what is wrong
  const auto j = parse_json_or_discarded(text);
  return j.is_object() && j.contains("chat_template") && !j["chat_template"].is_null();
}
}  // namespace

namespace {
struct ServeOptions {
  std::string model, host = "127.0.0.1", api_key, served_name, kv_cache_memory, scheduler = "fifo", expert_stats;
  int port = 8000;
  int64_t max_num_seqs = 64, max_batch_tokens = 2048, max_model_len = 0, max_waiting = 128, max_tokens = 0;
  int64_t max_body_bytes = 1 << 20, max_connections = 1024, max_connections_per_client = 256;
  double request_timeout = 30;
  bool no_prefix_caching = false;
  SpeculativeCli speculative;
  int64_t speculative_max_batch = 8;
  RuntimeOptions rt;
};

// "4GiB", "512MiB", "2G" (binary), "1.5GB" (decimal), "1000000" (bytes).
uint64_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  double mult = 0;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KiB" || unit == "K") mult = 1024.0;
  else if (unit == "MiB" || unit == "M") mult = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G") mult = 1024.0 * 1024 * 1024;
  else if (unit == "KB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  RINFER_CHECK(end != s.c_str() && mult > 0 && std::isfinite(v) && v > 0,
               "--kv-cache-memory: expected a size such as 4GiB, 512MiB or 1GB, got \"", s, "\"");
  return uint64_t(v * mult);
}
}  // namespace

Runner add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  cmd->add_option("--model,-m", o->model, "rinfer model directory or Hugging Face checkpoint directory")->required();
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (0: any free port)")->check(integer_in(0, 65535));
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--served-model-name", o->served_name, "Model name in /v1/models and responses (default: directory name)");
  cmd->add_option("--scheduler", o->scheduler, "fifo | priority | preemption (see docs/serving.md)")
      ->check(CLI::IsMember({"fifo", "priority", "preemption"}));
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences running at once at most")->check(integer_in(1, 65536));
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "Tokens per engine step at most (decode + prompt chunks)")
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("--max-model-len", o->max_model_len, "Prompt + output tokens at most (default: the model's)")
      ->check(integer_in(0));
  auto* mem = cmd->add_option("--kv-cache-memory", o->kv_cache_memory,
                              "KV cache size, e.g. 4GiB (default: enough for max-num-seqs full sequences, at most 1GiB)");
  cmd->add_option("--max-waiting", o->max_waiting, "Queued requests at most; beyond, 503 with Retry-After")
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("--max-tokens-limit", o->max_tokens, "Largest max_tokens a request may ask (default: max-model-len)")
      ->check(integer_in(0));
  cmd->add_option("--expert-stats", o->expert_stats,
                  "MoE models: write the tokens routed to each expert of each layer while serving (the input of "
                  "rinfer plan-experts), every 10 s and on shutdown");
  cmd->add_option("--max-body-bytes", o->max_body_bytes, "Largest request body")->check(integer_in(1024));
  cmd->add_option("--max-connections", o->max_connections, "Connections held at once; beyond, 503 (default 1024)")
      ->check(integer_in(1, 1 << 16));
  cmd->add_option("--max-connections-per-client", o->max_connections_per_client,
                  "Connections held at once from one client address; beyond, 503 (default 256)")
      ->check(integer_in(1, 1 << 16));
  cmd->add_option("--request-timeout", o->request_timeout,
                  "Seconds a request (headers and body) may take to arrive from its first byte (default 30)")
      ->check(number_in(0.1, 3600.0));
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Do not share KV blocks of identical prompt prefixes");
  add_speculative_options(cmd, o->speculative);
  cmd->add_option("--speculative-max-batch", o->speculative_max_batch,
                  "With --speculative: no drafts while more sequences than this run (default 8)")
      ->check(integer_in(1, 65536));
  add_runtime_options(cmd, o->rt);
  cmd->add_option("--micro-batches", o->rt.micro_batches,
                  "With --pp: cut each step's batch into this many micro-batches (whole sequences), so that the "
                  "stages work at once (default 1)")
      ->check(integer_in(1, 1024));
  return [o, mem]() -> int {
    const SchedulerPolicy policy = parse_scheduler_policy(o->scheduler);
    RINFER_CHECK(o->speculative.mode != "draft",
                 "serve --speculative draft is not supported yet (a draft model per batch); use --speculative ngram");
    RINFER_CHECK(o->speculative.draft_model.empty() && o->speculative.draft_dtype.empty(),
                 "serve: --draft-model and --draft-dtype are for run and bench");
    RINFER_CHECK(!(mem->count() > 0 && o->rt.kv_cache_tokens > 0), "give --kv-cache-memory or --kv-cache-tokens, not both");
    // Signals are taken by one thread (below), so block them before any
    // thread exists; a write to a closed socket must not kill the server.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);

    const RuntimeOptions& rt = o->rt;
    auto model_len_of = [&](const ModelConfig& cfg) {
      return o->max_model_len > 0 ? std::min(cfg.max_position_embeddings, o->max_model_len)
                                  : cfg.max_position_embeddings;
    };
    // Without --kv-cache-tokens the cache is sized from the model's bytes per
    // token: --kv-cache-memory, or max-num-seqs full sequences within 1 GiB.
    KvSizer size_kv;
    if (rt.kv_cache_tokens == 0)
      size_kv = [&](const LoadedModel& lm, DType kv_dtype) {
        const uint64_t per_token = KVCache::bytes_per_token(lm.model->kv_shape(), kv_dtype);
        const int64_t model_len = model_len_of(lm.config);
        int64_t tokens;
        if (mem->count() > 0) {
          tokens = int64_t(parse_bytes(o->kv_cache_memory) / per_token);
        } else {
          tokens = std::min<int64_t>(o->max_num_seqs * model_len, int64_t((uint64_t(1) << 30) / per_token));
          tokens = std::max(tokens, model_len);
        }
        RINFER_CHECK(tokens >= rt.block_size, "--kv-cache-memory ", o->kv_cache_memory, " holds less than one block");
        return tokens / rt.block_size * rt.block_size;
      };
    o->rt.expert_stats = !o->expert_stats.empty();
    auto s = open_session(o->model, rt, /*need_tokenizer=*/true, size_kv);
    const auto& cfg = s->lm.config;
    const int64_t model_len = model_len_of(cfg);
    RINFER_CHECK(o->expert_stats.empty() || !s->lm.model->expert_counts().empty(), "--expert-stats: ",
                 s->lm.config.architecture, " has no mixture-of-experts layers");
    EngineOptions eo;
    eo.expert_counts = !o->expert_stats.empty();
    eo.scheduler.policy = policy;
    eo.scheduler.max_num_seqs = o->max_num_seqs;
    eo.scheduler.max_batch_tokens = o->max_batch_tokens;
    const SpeculativeOptions spec = o->speculative.options();
    eo.scheduler.speculative = {spec.num_tokens, spec.ngram_max, o->speculative_max_batch};
    eo.max_model_len = model_len;
    eo.prefix_caching = !o->no_prefix_caching;
    eo.max_waiting = o->max_waiting;
    Engine engine(*s->runner, eo);

    // What `rinfer run` stops at: the model's EOS ids and the tokenizer's.
    std::vector<int32_t> eos = cfg.eos_token_ids;
    const int32_t tok_eos = s->tokenizer->eos_id();
    if (tok_eos >= 0 && std::find(eos.begin(), eos.end(), tok_eos) == eos.end()) eos.push_back(tok_eos);
    // The model's own chat template when it has one (a broken one is an
    // error); otherwise /v1/chat/completions uses the plain fallback format.
    std::unique_ptr<ChatTemplate> chat_template;
    if (has_chat_template(o->model)) chat_template = std::make_unique<ChatTemplate>(ChatTemplate::load(o->model));
    server::ServerOptions so;
    so.chat_template = chat_template.get();
    so.host = o->host;
    so.port = o->port;
    so.api_key = o->api_key;
    so.model_name = o->served_name.empty() ? s->lm.name : o->served_name;
    so.max_body_bytes = size_t(o->max_body_bytes);
    so.max_connections = size_t(o->max_connections);
    so.max_connections_per_client = size_t(o->max_connections_per_client);
    so.request_timeout_s = o->request_timeout;
    so.max_tokens_limit = o->max_tokens;
    server::HttpServer http(engine, *s->tokenizer, eos, so);
    const int port = http.bind();
    std::fprintf(stderr,
                 "rinfer serve: %s on http://%s:%d (scheduler %s, max-num-seqs %lld, max-batch-tokens %lld, "
                 "max-model-len %lld, KV %lld blocks x %d tokens = %.1f MiB, prefix caching %s%s%s%s)\n",
                 so.model_name.c_str(), o->host.c_str(), port, scheduler_policy_name(policy),
                 (long long)o->max_num_seqs, (long long)o->max_batch_tokens, (long long)engine.max_model_len(),
                 (long long)s->kv().n_blocks(), s->kv().block_size(), double(s->kv().bytes()) / (1 << 20),
                 eo.prefix_caching ? "on" : "off",
                 spec.num_tokens > 0 ? str(", speculative ngram up to ", spec.num_tokens, " drafts").c_str() : "",
                 o->api_key.empty() ? "" : ", API key required", parallel_summary(rt).c_str());
    std::fflush(stderr);
    std::thread waiter([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      http.stop();
    });
    // --expert-stats: written every 10 s while serving too, so that a job
    // ended from outside (Ctrl-C on mpirun kills the ranks) keeps its loads.
    struct PeriodicStats {
      std::mutex mu;
      std::condition_variable cv;
      bool stopping = false;
      std::thread thread;
      void stop() {
        if (!thread.joinable()) return;
        {
          std::lock_guard<std::mutex> lk(mu);
          stopping = true;
        }
        cv.notify_all();
        thread.join();
      }
      ~PeriodicStats() { stop(); }
    } stats_writer;
    if (!o->expert_stats.empty()) {
      // Once now: a path that cannot be written is an error before serving.
      write_expert_stats_file(o->expert_stats, *s, engine.stats().expert_counts);
      stats_writer.thread = std::thread([&] {
        std::unique_lock<std::mutex> lk(stats_writer.mu);
        while (!stats_writer.cv.wait_for(lk, std::chrono::seconds(10), [&] { return stats_writer.stopping; })) {
          try {
            write_expert_stats_file(o->expert_stats, *s, engine.stats().expert_counts);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rinfer serve: warning: %s\n", e.what());
          }
        }
      });
    }
    http.serve();
    http.stop();
    pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter if serve() ended another way
    waiter.join();
    if (!o->expert_stats.empty()) {
      stats_writer.stop();
      write_expert_stats_file(o->expert_stats, *s, engine.stats().expert_counts);
      std::fprintf(stderr, "rinfer serve: expert loads written to %s\n", o->expert_stats.c_str());
    }
    if (rt.pp > 1)
      std::fprintf(stderr, "rinfer serve: pipeline bubble fraction %.3f over %lld steps\n",
                   s->runner->pipeline_stats().bubble_fraction(), (long long)s->runner->pipeline_stats().steps);
    std::fprintf(stderr, "rinfer serve: stopped\n");
    return 0;
  };
}

}  // namespace rinfer::cli

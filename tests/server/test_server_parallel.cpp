// `rinfer serve` split over ranks under mpirun: with --tp 2 and with --pp 2
// --micro-batches 2, 16 concurrent greedy requests through the `openai` npm
// client (streamed and not) get exactly what single-process `rinfer run`
// generates, /metrics reports the pipeline's bubble, and SIGINT to mpirun
// ends every rank. A rank killed mid-generation, or one that stops
// answering (SIGSTOP, caught by --step-timeout), ends every rank within
// 10 s with a non-zero exit and a message.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include "server_test_util.h"

namespace rinfer::test {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

// `mpirun -np N rinfer serve --model stories ARGS` on its own port, run on a
// thread (bounded by timeout) so that its exit code and output are known.
class MpiServer {
 public:
  MpiServer(int ranks, const std::string& args, const std::string& model = stories_dir())
      : port_(20000 + int((getpid() * 7 + counter_++ * 131) % 20000)) {
    const std::string cmd = "timeout 180 mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) +
                            " " + RINFER_BIN + " serve --model " + quote(model) + " " + args +
                            " --port " + std::to_string(port_);
    done_ = std::async(std::launch::async, [this, cmd] {
      exit_code_ = sh(cmd, output_);
      exited_at_ = clock::now();
    });
  }
  ~MpiServer() {
    if (done_.valid() && done_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      std::system(("pkill -KILL -f '[m]pirun .*--port " + std::to_string(port_) + "'").c_str());
      done_.wait();
    }
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool wait_up() {
    httplib::Client c("127.0.0.1", port_);
    for (int i = 0; i < 300; ++i) {
      auto r = c.Get("/health");
      if (r && r->status == 200) return true;
      if (exited(0)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string metrics() const {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    return r ? r->body : "";
  }
  // The pid of rank r's process (its OMPI_COMM_WORLD_RANK), or -1.
  pid_t rank_pid(int rank) const {
    const std::string port_arg = "--port\0" + std::to_string(port_);
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream cl(e.path() / "cmdline"), env(e.path() / "environ");
      std::string cmdline((std::istreambuf_iterator<char>(cl)), {}), environ((std::istreambuf_iterator<char>(env)), {});
      if (cmdline.find(std::string("serve\0", 6)) == std::string::npos ||
          cmdline.find("mpirun") != std::string::npos ||
          cmdline.find(std::to_string(port_)) == std::string::npos)
        continue;
      if (environ.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
        return pid_t(std::stoi(name));
    }
    return -1;
  }
  // Whether mpirun has exited within `seconds`.
  bool exited(double seconds) {
    return done_.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  }
  int exit_code() const { return exit_code_; }
  const std::string& output() const { return output_; }
  clock::time_point exited_at() const { return exited_at_; }

 private:
  static inline int counter_ = 0;
  int port_;
  std::future<void> done_;
  int exit_code_ = -1;
  std::string output_;
  clock::time_point exited_at_;
};

// What `rinfer run` generates greedily for each prompt: [{prompt, ids}].
json expected_cases(int n, int max_tokens, const std::string& model = stories_dir()) {
  json cases = json::array();
  for (int i = 0; i < n; ++i) {
    const std::string prompt = i % 2 ? "Once upon a time, there was a little " + std::string(i % 4 ? "dog" : "cat")
                                     : "The sun was " + std::to_string(i) + " and Lily";
    auto run = run_rinfer("run --model " + quote(model) + " --prompt " + quote(prompt) +
                          " --max-new-tokens " + std::to_string(max_tokens) + " --temperature 0 --json");
    EXPECT_EQ(run.code, 0) << run.err;
    const json j = json::parse(run.out);
    cases.push_back({{"prompt", prompt}, {"ids", j["output_ids"]}});
  }
  return cases;
}

// tests/server/openai_concurrent.mjs against the server: every case's
// greedy ids, streamed and not, through the `openai` npm client.
void expect_openai_clients_get(const MpiServer& server, const std::string& npm_dir, const json& cases) {
  std::string out;
  const int rc = sh("OPENAI_NPM_DIR=" + quote(npm_dir) + " RINFER_URL=" + quote(server.url()) + " CASES=" +
                        quote(cases.dump()) + " timeout 120 node " +
                        quote(std::string(RINFER_SOURCE_DIR) + "/tests/server/openai_concurrent.mjs"),
                    out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
}

class ServeSplit : public ::testing::TestWithParam<const char*> {};

TEST_P(ServeSplit, SixteenConcurrentGreedyStreamsMatchRinferRun) {
  std::string why;
  const std::string npm_dir = openai_npm_dir(why);
  ASSERT_FALSE(npm_dir.empty()) << why;
  const json cases = expected_cases(16, 24);
  MpiServer server(2, GetParam());
  ASSERT_TRUE(server.wait_up()) << GetParam() << " did not come up:\n" << server.output();
  expect_openai_clients_get(server, npm_dir, cases);
  const std::string m = server.metrics();
  if (std::string(GetParam()).find("--pp 2") != std::string::npos) {
    // Stage 0 waits for stage 1 and the other way round: some bubble, never all.
    const auto at = m.find("\nrinfer_pipeline_bubble_fraction ");
    ASSERT_NE(at, std::string::npos) << m;
    const double bubble = std::stod(m.substr(at + 33));
    EXPECT_GT(bubble, 0.0);
    EXPECT_LT(bubble, 1.0);
    EXPECT_NE(m.find("\nrinfer_pipeline_micro_batches 2\n"), std::string::npos) << m;
  } else {
    EXPECT_EQ(m.find("rinfer_pipeline"), std::string::npos) << m;
  }
  // SIGINT to mpirun (Ctrl-C) ends the job: no rank survives it.
  ASSERT_EQ(std::system(("pkill -INT -f '[m]pirun .*--port " + std::to_string(server.port()) + "'").c_str()), 0);
  ASSERT_TRUE(server.exited(10)) << "mpirun still running 10 s after SIGINT";
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = server.rank_pid(0) == -1 && server.rank_pid(1) == -1;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "ranks still running 10 s after mpirun ended";
}

INSTANTIATE_TEST_SUITE_P(Layouts, ServeSplit, ::testing::Values("--tp 2", "--pp 2 --micro-batches 2"));

// A MoE model served over two expert-parallel ranks that move experts
// every 4 steps: 16 concurrent greedy streams get what `rinfer run`
// generates, /metrics shows the moves, and --expert-stats is written on
// shutdown.
TEST(ServerParallel, ExpertParallelWithRebalancingServesWhatOneProcessGenerates) {
  std::string why;
  const std::string npm_dir = openai_npm_dir(why);
  ASSERT_FALSE(npm_dir.empty()) << why;
  const std::string model = testdata("golden/mixtral/hf").string();
  const json cases = expected_cases(16, 16, model);
  const fs::path stats = fs::temp_directory_path() / ("rinfer-ep-stats-" + std::to_string(getpid()) + ".json");
  MpiServer server(2, "--ep 2 --rebalance-every 4 --expert-stats " + quote(stats.string()), model);
  ASSERT_TRUE(server.wait_up()) << server.output();
  expect_openai_clients_get(server, npm_dir, cases);
  const std::string m = server.metrics();
  const auto at = m.find("\nrinfer_expert_moves_total ");
  ASSERT_NE(at, std::string::npos) << m;
  EXPECT_GT(std::stod(m.substr(at + 27)), 0.0) << m;
  EXPECT_NE(m.find("rinfer_expert_window_balancedness{layer=\"1\"}"), std::string::npos) << m;
  // SIGINT to rank 0 stops the job the graceful way: the loads are written.
  const pid_t rank0 = server.rank_pid(0);
  ASSERT_GT(rank0, 0);
  ASSERT_EQ(kill(rank0, SIGINT), 0);
  ASSERT_TRUE(server.exited(20)) << "mpirun still running 20 s after SIGINT to rank 0";
  EXPECT_EQ(server.exit_code(), 0) << server.output();
  std::ifstream f(stats);
  ASSERT_TRUE(f.good()) << "no " << stats << "\n" << server.output();
  const json j = json::parse(f);
  ASSERT_EQ(j["layers"].size(), 2u);
  uint64_t routed = 0;
  for (const auto& l : j["layers"])
    for (uint64_t c : l["counts"]) routed += c;
  EXPECT_GT(routed, 0u);
  fs::remove(stats);
}

// Keeps the server generating (long greedy completions, four at a time)
// until the job ends.
void keep_busy(const MpiServer& server, std::atomic<bool>& stop) {
  std::vector<std::thread> clients;
  for (int k = 0; k < 4; ++k)
    clients.emplace_back([&] {
      while (!stop) {
        httplib::Client c("127.0.0.1", server.port());
        c.set_read_timeout(5, 0);
        const json body = {{"model", "m"}, {"prompt", "Once upon a time"}, {"max_tokens", 400},
                           {"temperature", 0}, {"ignore_eos", true}};
        if (!c.Post("/v1/completions", body.dump(), "application/json")) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  for (auto& t : clients) t.detach();
}

struct Fault {
  const char* layout;
  int signal;
  const char* message;  // what the job's output must say
};

class RankFault : public ::testing::TestWithParam<Fault> {};

TEST_P(RankFault, EndsEveryRankWithinTenSeconds) {
  const Fault f = GetParam();
  MpiServer server(2, std::string(f.layout) + " --step-timeout 2");
  ASSERT_TRUE(server.wait_up()) << server.output();
  std::atomic<bool> stop{false};
  keep_busy(server, stop);
  // Mid-generation: wait until tokens are flowing.
  bool busy = false;
  for (int i = 0; i < 100 && !busy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string m = server.metrics();
    const auto at = m.find("\nrinfer_generation_tokens_total ");
    busy = at != std::string::npos && std::stod(m.substr(at + 32)) > 0;
  }
  ASSERT_TRUE(busy) << "no tokens generated";
  const pid_t victim = server.rank_pid(1);
  ASSERT_GT(victim, 0);
  const auto t0 = clock::now();
  ASSERT_EQ(kill(victim, f.signal), 0);
  const bool ended = server.exited(15);
  stop = true;
  ASSERT_TRUE(ended) << "the job still runs 15 s after the fault";
  const double took = std::chrono::duration<double>(server.exited_at() - t0).count();
  EXPECT_LT(took, 10.0);
  EXPECT_NE(server.exit_code(), 0) << server.output();
  EXPECT_NE(server.output().find(f.message), std::string::npos) << server.output();
  if (f.signal == SIGSTOP) kill(victim, SIGKILL);  // should be gone already; never leave it stopped
}

INSTANTIATE_TEST_SUITE_P(
    Signals, RankFault,
    ::testing::Values(Fault{"--pp 2", SIGKILL, "exited on signal 9"}, Fault{"--tp 2", SIGKILL, "exited on signal 9"},
                      Fault{"--pp 2", SIGSTOP, "a forward step took longer than 2 s"},
                      Fault{"--tp 2", SIGSTOP, "a forward step took longer than 2 s"}));

}  // namespace
}  // namespace rinfer::test

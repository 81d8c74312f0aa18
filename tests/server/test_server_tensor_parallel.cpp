// `mpirun -np 2 rinfer serve --tp 2`: 16 concurrent greedy requests get
// exactly the token ids single-process `rinfer run` gives, and SIGINT to
// mpirun ends every rank.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "server_test_util.h"

namespace rinfer::test {
namespace {

using json = nlohmann::json;

TEST(ServerTensorParallel, SixteenGreedyStreamsMatchRinferRun) {
  const int port = 20000 + int(getpid() % 20000);
  const std::string tag = "rinfer_tp_serve_" + std::to_string(port);
  const std::string log = (std::filesystem::temp_directory_path() / (tag + ".log")).string();
  // In the background, bounded by timeout so that nothing outlives the test.
  const std::string cmd = "timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 " + std::string(RINFER_BIN) +
                          " serve --model " + quote(stories_dir()) + " --tp 2 --port " + std::to_string(port) +
                          " > " + log + " 2>&1 &";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    auto r = c.Get("/health");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << "serve --tp 2 did not come up on port " << port;

  std::vector<std::string> prompts;
  for (int i = 0; i < 16; ++i)
    prompts.push_back(i % 2 ? "Once upon a time, there was a little " + std::string(i % 4 ? "dog" : "cat")
                            : "The sun was " + std::to_string(i) + " and Lily");
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client ci("127.0.0.1", port);
      ci.set_read_timeout(60, 0);
      const json body = {{"model", "m"}, {"prompt", prompts[i]}, {"max_tokens", 24}, {"temperature", 0},
                         {"return_token_ids", true}};
      auto r = ci.Post("/v1/completions", body.dump(), "application/json");
      if (!r || r->status != 200) return;
      got[i] = json::parse(r->body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
    });
  for (auto& t : clients) t.join();

  for (size_t i = 0; i < prompts.size(); ++i) {
    auto run = run_rinfer("run --model " + quote(stories_dir()) + " --prompt " + quote(prompts[i]) +
                          " --max-new-tokens 24 --temperature 0 --json");
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(got[i], json::parse(run.out)["output_ids"].get<std::vector<int32_t>>()) << prompts[i];
  }

  // SIGINT to mpirun: it forwards it, rank 0 stops and releases the other rank.
  const std::string stop = "pkill -INT -f '[m]pirun .*--port " + std::to_string(port) + "'";
  ASSERT_EQ(std::system(stop.c_str()), 0);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = std::system(("pgrep -f '[s]erve .*--port " + std::to_string(port) + "' > /dev/null").c_str()) != 0;
  }
  EXPECT_TRUE(gone) << "ranks still running 10 s after SIGINT";
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace rinfer::test

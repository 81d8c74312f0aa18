// The official `openai` npm package against `rinfer serve`: installed into
// the build tree once (npm's cache makes later installs offline), then
// tests/server/openai_client.mjs runs its checks in Node.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "server_test_util.h"

namespace rinfer::test {
namespace {

namespace fs = std::filesystem;

// Runs a shell command, returning its exit code and interleaved output.
int sh(const std::string& cmd, std::string& out) {
  out.clear();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST(OpenAINodeClient, ChatAndCompletionsStreamingAndNot) {
  std::string out;
  ASSERT_EQ(sh("node --version", out), 0) << "Node.js is needed for this test: " << out;
  const fs::path npm_dir = fs::path(RINFER_BIN).parent_path().parent_path() / "npm";
  if (!fs::exists(npm_dir / "node_modules" / "openai" / "package.json")) {
    const int rc = sh("timeout 180 npm install --prefix " + quote(npm_dir.string()) +
                          " openai --prefer-offline --no-audit --no-fund --loglevel=error",
                      out);
    ASSERT_EQ(rc, 0) << "npm could not install the openai package into " << npm_dir
                     << " (npm registry unreachable and nothing in npm's cache?):\n"
                     << out;
  }
  TestServer s;
  const std::string prompt = "Once upon a time, there was a little girl";
  auto run = run_rinfer("run --model " + quote(stories_dir()) + " --prompt " + quote(prompt) +
                        " --max-new-tokens 20 --temperature 0 --json");
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string ids = nlohmann::json::parse(run.out)["output_ids"].dump();
  const int rc = sh("OPENAI_NPM_DIR=" + quote(npm_dir.string()) + " RINFER_URL=" + quote(s.url()) +
                        " PROMPT=" + quote(prompt) + " EXPECTED_IDS=" + quote(ids) + " timeout 120 node " +
                        quote(std::string(RINFER_SOURCE_DIR) + "/tests/server/openai_client.mjs"),
                    out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

}  // namespace
}  // namespace rinfer::test

// The official `openai` npm package against `rinfer serve`: installed into
// the build tree once (npm's cache makes later installs offline), then
// tests/server/openai_client.mjs runs its checks in Node.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "server_test_util.h"

namespace rinfer::test {
namespace {


TEST(OpenAINodeClient, ChatAndCompletionsStreamingAndNot) {
  std::string out, why;
  const std::string npm_dir = openai_npm_dir(why);
  ASSERT_FALSE(npm_dir.empty()) << why;
  TestServer s;
  const std::string prompt = "Once upon a time, there was a little girl";
  auto run = run_rinfer("run --model " + quote(stories_dir()) + " --prompt " + quote(prompt) +
                        " --max-new-tokens 20 --temperature 0 --json");
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string ids = nlohmann::json::parse(run.out)["output_ids"].dump();
  const int rc = sh("OPENAI_NPM_DIR=" + quote(npm_dir) + " RINFER_URL=" + quote(s.url()) +
                        " PROMPT=" + quote(prompt) + " EXPECTED_IDS=" + quote(ids) + " timeout 120 node " +
                        quote(std::string(RINFER_SOURCE_DIR) + "/tests/server/openai_client.mjs"),
                    out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  EXPECT_EQ(s.blocks_used_when_idle(), 0);
}

}  // namespace
}  // namespace rinfer::test

#pragma once
// Shared helpers for rinfer tests: where the shared test data is (a missing
// folder fails the test, never skips it), running the CLI, temp dirs.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace rinfer::test {

inline std::filesystem::path testdata(const std::string& rel = "") {
  std::filesystem::path p = std::filesystem::path(RINFER_TESTDATA_DIR) / rel;
  if (!std::filesystem::exists(p))
    ADD_FAILURE() << "shared test data missing: " << p << " (set -DRINFER_TESTDATA_DIR)";
  return p;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  return nlohmann::json::parse(in);
}

inline std::vector<float> read_f32(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary | std::ios::ate);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  std::vector<float> v(size_t(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * 4));
  return v;
}

struct CmdResult {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command, capturing its stdout and stderr apart.
inline CmdResult run_shell(const std::string& command) {
  static int counter = 0;
  auto err_path = std::filesystem::temp_directory_path() /
                  ("rinfer_test_err_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  std::string cmd = command + " 2>" + err_path.string();
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

// Runs `rinfer ARGS` through the shell, capturing stdout and stderr.
inline CmdResult run_rinfer(const std::string& args) { return run_shell(std::string(RINFER_BIN) + " " + args); }

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

// A fresh, empty temporary directory removed at destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/rinfer_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& rel) const { return (path / rel).string(); }
};

}  // namespace rinfer::test

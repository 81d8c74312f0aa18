#pragma once
// Helpers shared by the tokenizer tests: shared test data paths (a missing
// file fails the test, it never skips it), throw-away model directories and
// error-message checks.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace rinfer::test {

namespace fs = std::filesystem;

// Path of a file or folder under the shared test data; throws (so the test
// fails) when it is missing.
inline fs::path testdata(const std::string& rel) {
  fs::path p = fs::path(RINFER_TESTDATA_DIR) / rel;
  if (!fs::exists(p)) throw std::runtime_error("missing test data: " + p.string());
  return p;
}

inline fs::path stories_hf() { return testdata("stories260K/hf"); }
inline fs::path stories_model() { return testdata("stories260K/tok512.model"); }

inline nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return nlohmann::json::parse(in);
}

inline void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("rinfer_tok_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // Model dir with tok512 as tokenizer.model and the given JSON files.
  void with_tok512() const { fs::copy_file(stories_model(), path_ / "tokenizer.model"); }
  void write(const std::string& name, const std::string& text) const { write_file(path_ / name, text); }

 private:
  fs::path path_;
};

// Runs fn and checks it throws rinfer::Error whose message contains `part`.
inline void expect_error(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected rinfer::Error containing \"" << part << "\"";
  } catch (const rinfer::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
}

// Renders every case of testdata tokenizer/hf/<family>/chat_cases.jsonl
// with `tmpl` and compares with transformers' rendering; returns how many.
inline int expect_chat_cases(const ChatTemplate& tmpl, const std::string& family) {
  std::ifstream in(testdata("tokenizer/hf/" + family + "/chat_cases.jsonl"));
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto c = nlohmann::ordered_json::parse(line);
    ChatTemplateOptions opt;
    opt.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    EXPECT_EQ(tmpl.render(c.at("messages"), opt), c.at("rendered").get<std::string>()) << "case " << n;
    ++n;
  }
  return n;
}

// GoogleTest parameter names for vocabulary names ("gpt-neox" -> "gpt_neox").
inline std::string vocab_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

}  // namespace rinfer::test

#pragma once
// Helpers for the end-to-end CLI tests: shared model paths, running rinfer
// and parsing its JSON, asserting the one-line error contract, and building
// corrupt checkpoints in temporary folders (never touching the shared data).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace rinfer::test::cli {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string stories_hf() { return testdata("stories260K/hf").string(); }
inline std::string golden_dir(const std::string& arch) { return testdata("golden/" + arch).string(); }
// Read once and kept: callers may iterate over parts of it (a temporary's
// member would dangle in a range-for).
inline const json& greedy_reference() {
  static const json ref = read_json(testdata("stories260K/reference/greedy_runc.json"));
  return ref;
}

inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Runs `rinfer ARGS`, expects exit 0 and one JSON object on stdout.
inline json run_json(const std::string& args) {
  CmdResult r = run_rinfer(args);
  EXPECT_EQ(r.code, 0) << "rinfer " << args << "\nstderr: " << r.err;
  if (r.code != 0) return json::object();
  try {
    return json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "stdout of rinfer " << args << " is not JSON: " << e.what() << "\n" << r.out;
    return json::object();
  }
}

inline std::vector<int32_t> ids_of(const json& j, const char* key) {
  if (!j.contains(key)) {
    ADD_FAILURE() << "no \"" << key << "\" in " << j.dump();
    return {};
  }
  return j.at(key).get<std::vector<int32_t>>();
}

// The error contract: exit 1 (or 2 for command-line usage errors), never a
// signal or a crash; nothing on stdout; exactly one line on stderr, starting
// "rinfer: error: " and containing `needle`.
inline void expect_error(const CmdResult& r, const std::string& needle, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "exit code " << r.code << "\nstderr: " << r.err;
  EXPECT_EQ(r.out, "") << "stdout should be empty on error";
  ASSERT_FALSE(r.err.empty()) << "no message on stderr";
  EXPECT_EQ(r.err.rfind("rinfer: error: ", 0), 0u) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "want exactly one line, got: " << r.err;
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_NE(r.err.find(needle), std::string::npos) << "message lacks \"" << needle << "\": " << r.err;
}

inline CmdResult expect_fails(const std::string& args, const std::string& needle) {
  CmdResult r = run_rinfer(args);
  expect_error(r, needle, "rinfer " + args);
  return r;
}

// Everything in `dir` whose name contains ".tmp-": what an interrupted or
// failed write would leave behind.
inline std::vector<std::string> tmp_leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// `run` and `convert` on a broken checkpoint: both fail with one line that
// contains `needle`; convert leaves neither its --out nor a temporary sibling.
inline void expect_checkpoint_rejected(const TempDir& tmp, const fs::path& ckpt, const std::string& needle) {
  SCOPED_TRACE("checkpoint " + ckpt.string());
  expect_fails("run --model " + quote(ckpt.string()) + " --prompt hi -n 2 --threads 1", needle);
  const fs::path out = tmp.path / "converted";
  expect_fails("convert --hf " + quote(ckpt.string()) + " --out " + quote(out.string()) + " --dtype f32 -q", needle);
  EXPECT_FALSE(fs::exists(out)) << "convert left " << out;
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty()) << "convert left " << tmp_leftovers(tmp.path).front();
}

// A writable copy of a checkpoint folder's files at `dst`.
inline fs::path copy_checkpoint(const std::string& src, const fs::path& dst) {
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const fs::path to = dst / e.path().filename();
    fs::copy_file(e.path(), to);
    fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  }
  return dst;
}

inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << p;
}

inline std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file split into its JSON header and data section, to edit
// and write back (8-byte little-endian header length, header, data).
struct Safetensors {
  json header;
  std::string data;

  static Safetensors load(const fs::path& p) {
    const std::string b = read_bytes(p);
    Safetensors st;
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(b[size_t(i)]);
    st.header = json::parse(b.substr(8, size_t(n)));
    st.data = b.substr(8 + size_t(n));
    return st;
  }
  void save(const fs::path& p) const {
    const std::string h = header.dump();
    write_bytes(p, u64_le(h.size()) + h + data);
  }
};

// Edits config.json of a checkpoint copy in place.
template <typename Fn>
void edit_config(const fs::path& dir, Fn fn) {
  json cfg = read_json(dir / "config.json");
  fn(cfg);
  write_bytes(dir / "config.json", cfg.dump(2));
}

}  // namespace rinfer::test::cli

// Tests for the safetensors reader, checkpoint loader and writer: round
// trips, the real stories260K checkpoint, sharded folders, one test per
// validation rule, and a seeded corruption loop that must never crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;
using rinfer::DType;
using rinfer::Shape;
using rinfer::io::SafetensorsCheckpoint;
using rinfer::io::SafetensorsFile;
using rinfer::io::SafetensorsWriter;

namespace {

const std::string kStoriesFile = RINFER_TESTDATA_DIR "/stories260K/hf/model.safetensors";
const std::string kGoldenDir = RINFER_TESTDATA_DIR "/golden";

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "rinfer_io_test_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }
  // Entries of the folder (used to spot leftover temporary files).
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char(uint8_t(v >> (8 * i)));
  return s;
}

// A safetensors file from a header text and a data section.
std::string st_bytes(const std::string& header, const std::string& data = {}) {
  return le64(header.size()) + header + data;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs fn, which must throw rinfer::Error whose one-line message contains
// every one of `parts`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one mentioning '" << (parts.empty() ? "" : parts[0]) << "'";
  } catch (const rinfer::Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line message: " << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-rinfer exception: " << e.what();
  }
}

// Write `header` + `data` to a file and expect opening it to fail with a
// message naming the file and containing `part`.
void expect_bad_file(const TempDir& dir, const std::string& header, const std::string& data, const std::string& part) {
  const std::string path = dir / "bad.safetensors";
  write_file(path, st_bytes(header, data));
  SCOPED_TRACE("header: " + header.substr(0, 200));
  expect_error([&] { SafetensorsFile f(path); }, {path, part});
}

std::string zeros(size_t n) { return std::string(n, '\0'); }

// Reads every byte of every tensor, so a bad span shows up under ASan or as
// a fault rather than passing silently.
uint64_t touch_all(const SafetensorsFile& f) {
  uint64_t sum = 0;
  for (const auto& e : f.tensors()) {
    auto v = f.view(e);
    auto* p = static_cast<const uint8_t*>(v.data);
    for (size_t i = 0; i < v.nbytes(); ++i) sum += p[i];
  }
  return sum;
}

}  // namespace

// ---------------------------------------------------------------- writer + reader

TEST(SafetensorsRoundTrip, ManyDtypesScalarsEmptyAndMetadata) {
  TempDir dir;
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e30f};
  std::vector<uint16_t> bf16, f16;
  for (float x : {1.0f, -3.5f, 0.125f, 65504.0f}) {
    bf16.push_back(rinfer::f32_to_bf16(x));
    f16.push_back(rinfer::f32_to_f16(x));
  }
  f16.pop_back();  // 3 x F16 = 6 bytes: the next tensor starts unaligned
  const std::vector<int8_t> i8 = {-128, -1, 0, 1, 127};
  const std::vector<int32_t> i32 = {1, -2, 3, -4};
  const std::vector<int64_t> i64 = {int64_t(1) << 40, -7};
  const std::vector<double> f64 = {3.141592653589793};
  const std::vector<uint8_t> u8 = {0, 255, 7}, boolv = {1, 0};
  const float scalar = 42.0f;

  SafetensorsWriter w;
  w.add("w.f32", DType::F32, {2, 3}, f32.data());
  w.add("w.bf16", DType::BF16, {2, 2}, bf16.data());
  w.add("w.f16", DType::F16, {3}, f16.data());
  w.add("w.i8", DType::I8, {5}, i8.data());
  w.add("w.i32", DType::I32, {2, 2}, i32.data());
  w.add("w.i64", DType::I64, {2}, i64.data());
  w.add("w.f64", DType::F64, {1}, f64.data());
  w.add("w.u8", DType::U8, {3}, u8.data());
  w.add("w.bool", DType::BOOL, {2}, boolv.data());
  w.add("scalar", DType::F32, {}, &scalar);
  w.add("empty", DType::F32, {0, 4}, nullptr);
  w.add("empty.bf16", DType::BF16, {3, 0}, nullptr);
  w.set_metadata("format", "pt");
  w.set_metadata("rinfer.note", "ünïcode ✓");
  EXPECT_EQ(w.data_bytes(), 24u + 8 + 6 + 5 + 16 + 16 + 8 + 3 + 2 + 4);
  const std::string path = dir / "rt.safetensors";
  w.write(path);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"rt.safetensors"}) << "temporary file left behind";

  SafetensorsFile f(path);
  EXPECT_EQ(f.path(), path);
  ASSERT_EQ(f.tensors().size(), 12u);
  EXPECT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("rinfer.note"), "ünïcode ✓");

  auto check = [&](const std::string& name, DType dt, const Shape& shape, const void* want) {
    SCOPED_TRACE(name);
    const auto* e = f.find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->name, name);
    EXPECT_EQ(e->dtype, dt);
    EXPECT_EQ(e->shape, shape);
    auto v = f.view(*e);
    EXPECT_EQ(v.dtype, dt);
    EXPECT_EQ(v.shape, shape);
    EXPECT_EQ(v.nbytes(), e->end - e->begin);
    if (v.nbytes()) {
      EXPECT_EQ(std::memcmp(v.data, want, v.nbytes()), 0);
    }
  };
  check("w.f32", DType::F32, {2, 3}, f32.data());
  check("w.bf16", DType::BF16, {2, 2}, bf16.data());
  check("w.f16", DType::F16, {3}, f16.data());
  check("w.i8", DType::I8, {5}, i8.data());
  check("w.i32", DType::I32, {2, 2}, i32.data());
  check("w.i64", DType::I64, {2}, i64.data());
  check("w.f64", DType::F64, {1}, f64.data());
  check("w.u8", DType::U8, {3}, u8.data());
  check("w.bool", DType::BOOL, {2}, boolv.data());
  check("scalar", DType::F32, {}, &scalar);
  check("empty", DType::F32, {0, 4}, nullptr);
  check("empty.bf16", DType::BF16, {3, 0}, nullptr);
  EXPECT_EQ(f.find("nope"), nullptr);

  // Values survive, not just bytes.
  auto sv = f.view(*f.find("scalar"));
  EXPECT_EQ(sv.numel(), 1);
  EXPECT_EQ(*sv.as<float>(), 42.0f);
  auto bv = f.view(*f.find("w.bf16"));
  EXPECT_EQ(rinfer::bf16_to_f32(bv.as<uint16_t>()[1]), -3.5f);

  // Tensors come in file order, which is insertion order, contiguous.
  const std::vector<std::string> order = {"w.f32", "w.bf16", "w.f16",  "w.i8",   "w.i32", "w.i64",
                                          "w.f64", "w.u8",   "w.bool", "scalar", "empty", "empty.bf16"};
  uint64_t expect_begin = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(f.tensors()[i].name, order[i]);
    EXPECT_EQ(f.tensors()[i].begin, expect_begin);
    expect_begin = f.tensors()[i].end;
  }
  EXPECT_EQ(expect_begin, w.data_bytes());
}

TEST(SafetensorsRoundTrip, HeaderIsPaddedAndDataSectionAligned) {
  TempDir dir;
  // Vary the name length so the unpadded header length takes every value mod 8.
  for (int extra = 0; extra < 8; ++extra) {
    SafetensorsWriter w;
    const float x[2] = {1, 2};
    w.add("t" + std::string(size_t(extra), 'x'), DType::F32, {2}, x);
    const std::string path = dir / "p.safetensors";
    w.write(path);
    const std::string bytes = read_file(path);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
    EXPECT_EQ((8 + n) % 8, 0u);
    EXPECT_EQ(bytes.size(), 8 + n + 8);
    const std::string header = bytes.substr(8, n);
    EXPECT_EQ(header.front(), '{');
    // Everything after the JSON is space padding.
    auto close = header.rfind('}');
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
    auto j = nlohmann::json::parse(header);
    EXPECT_FALSE(j.contains("__metadata__")) << "empty metadata must not be written";
    EXPECT_EQ(j["t" + std::string(size_t(extra), 'x')]["data_offsets"], nlohmann::json::array({0, 8}));
    SafetensorsFile f(path);
    EXPECT_TRUE(f.metadata().empty());
    EXPECT_EQ(f.view(f.tensors().at(0)).as<float>()[1], 2.0f);
    // The data section starts 8-byte aligned within the (page-aligned) mapping.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.view(f.tensors().at(0)).data) % 8, 0u);
  }
}

TEST(SafetensorsRoundTrip, EmptyFileHasNoTensors) {
  TempDir dir;
  SafetensorsWriter w;
  EXPECT_EQ(w.data_bytes(), 0u);
  w.write(dir / "none.safetensors");
  SafetensorsFile f(dir / "none.safetensors");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
}

TEST(SafetensorsRoundTrip, OverwriteReplacesFileAtomically) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const float a = 1.0f, b[3] = {7, 8, 9};
  SafetensorsWriter w1;
  w1.add("a", DType::F32, {1}, &a);
  w1.write(path);
  SafetensorsFile first(path);  // keeps the old inode mapped across the rename
  SafetensorsWriter w2;
  w2.add("b", DType::F32, {3}, b);
  w2.write(path);
  SafetensorsFile second(path);
  EXPECT_EQ(second.find("a"), nullptr);
  ASSERT_NE(second.find("b"), nullptr);
  EXPECT_EQ(second.view(*second.find("b")).as<float>()[2], 9.0f);
  // The earlier mapping still sees the earlier contents: the file was replaced, not rewritten.
  EXPECT_EQ(*first.view(*first.find("a")).as<float>(), 1.0f);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
}

TEST(SafetensorsWriter, RejectsBadTensors) {
  SafetensorsWriter w;
  const float x[4] = {};
  w.add("x", DType::F32, {4}, x);
  expect_error([&] { w.add("x", DType::F32, {4}, x); }, {"duplicate tensor", "'x'"});
  expect_error([&] { w.add("__metadata__", DType::F32, {4}, x); }, {"reserved"});
  expect_error([&] { w.add("", DType::F32, {4}, x); }, {"empty tensor name"});
  expect_error([&] { w.add("neg", DType::F32, {-1, 4}, x); }, {"'neg'", "invalid shape"});
  expect_error([&] { w.add("huge", DType::F32, {int64_t(1) << 62, 8}, x); }, {"'huge'", "invalid shape"});
  expect_error([&] { w.add("big", DType::U8, {int64_t(1) << 32, int64_t(1) << 31}, x); }, {"'big'", "invalid shape"});
  expect_error([&] { w.add("null", DType::F32, {4}, nullptr); }, {"'null'", "no data"});
  EXPECT_EQ(w.data_bytes(), 16u);  // failed adds leave the writer unchanged
}

TEST(SafetensorsWriter, FailureLeavesNoFiles) {
  TempDir dir;
  const float x = 1.0f;
  SafetensorsWriter w;
  w.add("x", DType::F32, {1}, &x);
  // Missing parent directory: nothing can be created.
  expect_error([&] { w.write(dir / "no/such/dir/m.safetensors"); }, {"cannot write", "no/such/dir/m.safetensors"});
  // Target is a directory: the temporary file is written, the rename fails,
  // and the temporary file must be cleaned up.
  fs::create_directory(dir / "target.safetensors");
  fs::path inner = fs::path(dir / "target.safetensors") / "keep";
  write_file(inner.string(), "x");
  expect_error([&] { w.write(dir / "target.safetensors"); }, {"cannot write", "target.safetensors"});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"target.safetensors"});
}

TEST(SafetensorsWriter, NonUtf8NameIsAnError) {
  TempDir dir;
  const float x = 1.0f;
  SafetensorsWriter w;
  w.add(std::string("bad\xff", 4), DType::F32, {1}, &x);
  expect_error([&] { w.write(dir / "u.safetensors"); }, {"UTF-8"});
  EXPECT_TRUE(dir.entries().empty());
}

// ---------------------------------------------------------------- real data

TEST(SafetensorsReal, Stories260K) {
  ASSERT_TRUE(fs::is_regular_file(kStoriesFile)) << "test data missing: " << kStoriesFile;
  SafetensorsFile f(kStoriesFile);
  EXPECT_GE(f.tensors().size(), 21u);
  EXPECT_EQ(f.tensors().size(), 47u);  // embed + 5 layers x 9 + final norm
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const auto* emb = f.find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::F32);
  EXPECT_EQ(emb->shape, (Shape{512, 64}));
  EXPECT_EQ(f.find("lm_head.weight"), nullptr) << "stories260K ties its embeddings";
  const auto* k = f.find("model.layers.0.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (Shape{32, 64}));  // 4 KV heads x head_dim 8

  // Zero copy: the view points into the mapping at exactly the header's offset.
  const std::string raw = read_file(kStoriesFile);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(raw[size_t(i)]);
  for (const auto& e : f.tensors()) {
    auto v = f.view(e);
    EXPECT_EQ(f.view(e).data, v.data);
    ASSERT_EQ(std::memcmp(v.data, raw.data() + 8 + n + e.begin, v.nbytes()), 0) << e.name;
  }
  auto v = f.view(*emb);
  bool nonzero = false;
  for (int64_t i = 0; i < v.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(v.as<float>()[i]));
    nonzero = nonzero || v.as<float>()[i] != 0.0f;
  }
  EXPECT_TRUE(nonzero);

  // Dropping pages is only a hint: the data reads back the same afterwards.
  std::vector<uint8_t> before(static_cast<const uint8_t*>(v.data), static_cast<const uint8_t*>(v.data) + v.nbytes());
  f.release(*emb);
  EXPECT_EQ(std::memcmp(before.data(), v.data, v.nbytes()), 0);
}

TEST(SafetensorsReal, Stories260KCheckpoint) {
  const std::string dir = fs::path(kStoriesFile).parent_path().string();
  ASSERT_TRUE(fs::is_directory(dir)) << "test data missing: " << dir;
  SafetensorsCheckpoint ck(dir);
  EXPECT_EQ(ck.dir(), dir);
  auto names = ck.names();
  EXPECT_EQ(names.size(), 47u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(ck.has("model.norm.weight"));
  EXPECT_FALSE(ck.has("lm_head.weight"));
  EXPECT_EQ(ck.find("lm_head.weight"), nullptr);
  ASSERT_NE(ck.find("model.norm.weight"), nullptr);
  auto emb = ck.get("model.embed_tokens.weight");
  EXPECT_EQ(emb.dtype, DType::F32);
  EXPECT_EQ(emb.shape, (Shape{512, 64}));
  EXPECT_EQ(ck.total_bytes(), 1040128u);  // 260,032 float32 parameters
  ck.release("model.embed_tokens.weight");
  expect_error([&] { ck.get("lm_head.weight"); }, {"missing tensor lm_head.weight in " + dir});
  expect_error([&] { ck.release("lm_head.weight"); }, {"missing tensor lm_head.weight"});
}

TEST(SafetensorsReal, EveryGoldenCheckpointLoads) {
  ASSERT_TRUE(fs::is_directory(kGoldenDir)) << "test data missing: " << kGoldenDir;
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    fs::path hf = entry.path() / "hf";
    if (!fs::is_directory(hf)) continue;
    SCOPED_TRACE(hf.string());
    SafetensorsCheckpoint ck(hf.string());
    EXPECT_FALSE(ck.names().empty());
    uint64_t sum = 0;
    for (const auto& name : ck.names()) sum += ck.get(name).nbytes();
    EXPECT_EQ(sum, ck.total_bytes());
    ++loaded;
  }
  EXPECT_GE(loaded, 10);
}

// ---------------------------------------------------------------- checkpoints

namespace {
void write_tensors(const std::string& path, const std::vector<std::pair<std::string, float>>& tensors) {
  SafetensorsWriter w;
  for (const auto& [name, value] : tensors) w.add(name, DType::F32, {1}, &value);
  w.write(path);
}
}  // namespace

TEST(SafetensorsCheckpoint, ShardedWithIndex) {
  TempDir dir;
  write_tensors(dir / "model-00001-of-00002.safetensors", {{"a", 1.0f}, {"b", 2.0f}});
  write_tensors(dir / "model-00002-of-00002.safetensors", {{"c", 3.0f}});
  // A stray file next to the shards is not part of the checkpoint.
  write_tensors(dir / "optimizer.safetensors", {{"a", 99.0f}});
  write_file(dir / "model.safetensors.index.json",
             R"({"metadata": {"total_size": 12}, "weight_map": {
                  "a": "model-00001-of-00002.safetensors",
                  "b": "model-00001-of-00002.safetensors",
                  "c": "model-00002-of-00002.safetensors"}})");
  SafetensorsCheckpoint ck(dir.str());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*ck.get("a").as<float>(), 1.0f);
  EXPECT_EQ(*ck.get("b").as<float>(), 2.0f);
  EXPECT_EQ(*ck.get("c").as<float>(), 3.0f);
  EXPECT_EQ(ck.total_bytes(), 12u);
  expect_error([&] { ck.get("d"); }, {"missing tensor d in " + dir.str()});
}

TEST(SafetensorsCheckpoint, IndexProblems) {
  TempDir dir;
  write_tensors(dir / "s1.safetensors", {{"a", 1.0f}});
  write_tensors(dir / "s2.safetensors", {{"b", 2.0f}, {"a", 5.0f}});
  const std::string index = dir / "model.safetensors.index.json";

  write_file(index, R"({"weight_map": {"a": "s1.safetensors", "x": "missing.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {"missing.safetensors", "does not exist"});

  write_file(index, R"({"weight_map": {"a": "s1.safetensors", "zzz": "s1.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {"'zzz'", "s1.safetensors", "no such tensor"});

  // Same tensor stored in two shards.
  write_file(index, R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {"'a'", "appears in both"});

  write_file(index, R"({"weight_map": {"a": "../s1.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {"not a file inside"});
  write_file(index, R"({"weight_map": {"a": "/etc/passwd"}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {"not a file inside"});

  write_file(index, R"({"weight_map": {"a": 3}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {index, "not a string"});
  write_file(index, R"({"metadata": {}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {index, "weight_map"});
  write_file(index, R"({"weight_map": {}})");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {index, "no tensors"});
  write_file(index, R"([1, 2])");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {index, "not a JSON object"});
  write_file(index, "{\"weight_map\": ");
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {index, "not valid JSON"});
}

TEST(SafetensorsCheckpoint, PrefersModelSafetensors) {
  TempDir dir;
  write_tensors(dir / "model.safetensors", {{"w", 1.0f}});
  write_tensors(dir / "adapter.safetensors", {{"w", 2.0f}, {"extra", 3.0f}});
  SafetensorsCheckpoint ck(dir.str());
  EXPECT_EQ(ck.names(), std::vector<std::string>{"w"});
  EXPECT_EQ(*ck.get("w").as<float>(), 1.0f);
}

TEST(SafetensorsCheckpoint, AllSafetensorsFilesWithoutIndex) {
  TempDir dir;
  write_tensors(dir / "b.safetensors", {{"y", 2.0f}});
  write_tensors(dir / "a.safetensors", {{"x", 1.0f}});
  write_file(dir / "config.json", "{}");
  SafetensorsCheckpoint ck(dir.str());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*ck.get("y").as<float>(), 2.0f);

  write_tensors(dir / "c.safetensors", {{"x", 5.0f}});
  expect_error([&] { SafetensorsCheckpoint ck2(dir.str()); },
               {"'x'", "appears in both", "a.safetensors", "c.safetensors"});
}

TEST(SafetensorsCheckpoint, CorruptShardNamesTheShard) {
  TempDir dir;
  write_file(dir / "model.safetensors", st_bytes("{oops"));
  expect_error([&] { SafetensorsCheckpoint ck(dir.str()); }, {dir / "model.safetensors", "not valid JSON"});
}

TEST(SafetensorsCheckpoint, DirectoryProblems) {
  TempDir dir;
  const std::string missing = dir / "nope";
  expect_error([&] { SafetensorsCheckpoint ck(missing); }, {"model directory " + missing + " does not exist"});

  write_file(dir / "file.txt", "x");
  expect_error([&] { SafetensorsCheckpoint ck(dir / "file.txt"); }, {"not a directory"});

  fs::create_directory(dir / "empty");
  expect_error([&] { SafetensorsCheckpoint ck(dir / "empty"); }, {"no *.safetensors files in " + (dir / "empty")});

  fs::create_directory(dir / "pt");
  write_file(dir / "pt/config.json", "{}");
  write_file(dir / "pt/pytorch_model.bin", "PK\x03\x04");
  expect_error([&] { SafetensorsCheckpoint ck(dir / "pt"); },
               {dir / "pt", "PyTorch pickle", "pytorch_model.bin", "safe_serialization=True"});

  fs::create_directory(dir / "pth");
  write_file(dir / "pth/consolidated.00.pth", "PK");
  expect_error([&] { SafetensorsCheckpoint ck(dir / "pth"); }, {"PyTorch pickle", "consolidated.00.pth"});

  fs::create_directory(dir / "ptfile");
  write_file(dir / "ptfile/weights.pt", "PK");
  expect_error([&] { SafetensorsCheckpoint ck(dir / "ptfile"); }, {"PyTorch pickle", "weights.pt"});
}

// ---------------------------------------------------------------- validation

TEST(SafetensorsValidation, FileProblems) {
  TempDir dir;
  const std::string p = dir / "f.safetensors";
  write_file(p, "");
  expect_error([&] { SafetensorsFile f(p); }, {p, "shorter than"});
  write_file(p, std::string("\x05\0\0\0\0", 5));
  expect_error([&] { SafetensorsFile f(p); }, {p, "shorter than"});
  expect_error([&] { SafetensorsFile f(dir / "missing.safetensors"); }, {"missing.safetensors"});
  expect_error([&] { SafetensorsFile f(dir.str()); }, {dir.str(), "not a regular file"});
}

TEST(SafetensorsValidation, HeaderLength) {
  TempDir dir;
  const std::string p = dir / "f.safetensors";
  write_file(p, le64(3) + "{}");  // one byte short
  expect_error([&] { SafetensorsFile f(p); }, {p, "truncated", "header length 3"});
  write_file(p, le64(~uint64_t(0)) + "{}");
  expect_error([&] { SafetensorsFile f(p); }, {p, "header length"});
  write_file(p, le64(uint64_t(1) << 63) + std::string(64, ' '));
  expect_error([&] { SafetensorsFile f(p); }, {p, "header length"});
  // Fits in the file but exceeds the 100 MB cap (a sparse file costs no disk).
  const uint64_t big = 100'000'001;
  write_file(p, le64(big));
  fs::resize_file(p, 8 + big);
  expect_error([&] { SafetensorsFile f(p); }, {p, "header length 100000001", "limit"});
}

TEST(SafetensorsValidation, HeaderJson) {
  TempDir dir;
  expect_bad_file(dir, "{not json", "", "not valid JSON");
  expect_bad_file(dir, "", "", "not valid JSON");
  expect_bad_file(dir, std::string("{}\0\0\0\0\0\0", 8), "", "not valid JSON");
  expect_bad_file(dir, std::string("{}\0garbage", 10), "", "NUL byte");
  expect_bad_file(dir, "{\"a\xff\": 1}", "", "not valid JSON");
  expect_bad_file(dir, "{} {}", "", "not valid JSON");
  expect_bad_file(dir, "[]", "", "not a JSON object");
  expect_bad_file(dir, "42", "", "not a JSON object");
  expect_bad_file(dir, "\"x\"", "", "not a JSON object");
  expect_bad_file(dir, R"({"a": {"dtype":"U8","shape":[1],"data_offsets":[0,1]},
                           "a": {"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                  zeros(2), "'a' twice");
  // Valid edge cases: no tensors, trailing spaces, leading whitespace.
  const std::string p = dir / "ok.safetensors";
  write_file(p, st_bytes("{}        "));
  EXPECT_TRUE(SafetensorsFile(p).tensors().empty());
  write_file(p, st_bytes(" {\"__metadata__\": {}}"));
  EXPECT_TRUE(SafetensorsFile(p).metadata().empty());
}

TEST(SafetensorsValidation, DeeplyNestedHeaderIsRejected) {
  TempDir dir;
  const size_t depth = 1'000'000;  // a recursive parser would overflow the stack
  std::string nested = "{\"t\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  expect_bad_file(dir, nested, "", "nests deeper than 128");
  expect_bad_file(dir, "{\"t\": " + std::string(depth, '['), "", "nests deeper than 128");
  // Brackets inside strings do not count; modest nesting is just a bad entry.
  expect_bad_file(dir, "{\"[[[[\": " + std::string(60, '[') + std::string(60, ']') + "}", "", "'[[[['");
  expect_bad_file(dir, "{\"t\": {\"x\": \"\\\"" + std::string(100, '{') + "\"}}", "", "missing \"dtype\"");
}

TEST(SafetensorsValidation, EntryFieldsAndTypes) {
  TempDir dir;
  const std::string d4 = zeros(4);
  expect_bad_file(dir, R"({"t": 5})", d4, "not a JSON object");
  expect_bad_file(dir, R"({"t": [1,2]})", d4, "not a JSON object");
  expect_bad_file(dir, R"({"t": {"shape":[1],"data_offsets":[0,4]}})", d4, "missing \"dtype\"");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","data_offsets":[0,4]}})", d4, "missing \"shape\"");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1]}})", d4, "missing \"data_offsets\"");
  expect_bad_file(dir, R"({"t": {"dtype":4,"shape":[1],"data_offsets":[0,4]}})", d4, "\"dtype\" is not a string");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":"1","data_offsets":[0,4]}})", d4, "\"shape\" is not an array");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", d4, "not an integer");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[true],"data_offsets":[0,4]}})", d4, "not an integer");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", d4, "not an integer");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1],"data_offsets":[0]}})", d4, "array of two integers");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", d4, "array of two integers");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1],"data_offsets":"0,4"}})", d4, "array of two integers");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})", d4, "array of two integers");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})", d4, "array of two integers");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", d4, "negative data offset");
  // Every error names the tensor.
  expect_bad_file(dir, R"({"my.tensor": {"dtype":"F32","shape":[1]}})", d4, "'my.tensor'");
  // Unknown extra keys are tolerated.
  const std::string p = dir / "ok.safetensors";
  write_file(p, st_bytes(R"({"t": {"dtype":"F32","shape":[1],"data_offsets":[0,4],"note":"x"}})", d4));
  EXPECT_EQ(SafetensorsFile(p).tensors().size(), 1u);
}

TEST(SafetensorsValidation, Dtypes) {
  TempDir dir;
  const std::string h = R"({"t": {"dtype":"Q4_K","shape":[1],"data_offsets":[0,4]}})";
  expect_bad_file(dir, h, zeros(4), "unknown dtype 'Q4_K'");
  expect_bad_file(dir, h, zeros(4), "BF16");  // the message lists the known names
  expect_bad_file(dir, R"({"t": {"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", zeros(4), "unknown dtype 'f32'");
  // Every known dtype is accepted with its size.
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I16, DType::I32,
                  DType::I64, DType::BOOL, DType::F8_E4M3, DType::F8_E5M2}) {
    const std::string p = dir / "ok.safetensors";
    const size_t n = 3 * rinfer::dtype_size(t);
    write_file(p, st_bytes(rinfer::str(R"({"t": {"dtype":")", rinfer::dtype_name(t),
                                       R"(","shape":[3],"data_offsets":[0,)", n, "]}}"),
                           zeros(n)));
    SafetensorsFile f(p);
    EXPECT_EQ(f.tensors().at(0).dtype, t);
  }
}

TEST(SafetensorsValidation, ShapesAndSpans) {
  TempDir dir;
  const std::string d16 = zeros(16);
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", d16,
                  "negative shape dimension -1");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[2,-2],"data_offsets":[0,16]}})", d16,
                  "negative shape dimension");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", d16, "needs 12 bytes");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[],"data_offsets":[0,0]}})", d16, "needs 4 bytes");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", d16, "begin 8 > end 4");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[2],"data_offsets":[12,20]}})", d16, "past the end of file");
  expect_bad_file(dir,
                  R"({"t": {"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}})",
                  d16, "past the end of file");
  expect_bad_file(dir, R"({"t": {"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}})", d16,
                  "too large");
  expect_bad_file(dir, R"({"t": {"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,16]}})", d16,
                  "too large");
  expect_bad_file(dir, R"({"t": {"dtype":"U8","shape":[1e300],"data_offsets":[0,16]}})", d16, "not an integer");
  // Overlaps, whatever the header order.
  expect_bad_file(dir, R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                           "b": {"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  d16, "overlap");
  expect_bad_file(dir, R"({"z": {"dtype":"F32","shape":[4],"data_offsets":[0,16]},
                           "a": {"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                  d16, "overlap");
  expect_bad_file(dir, R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                           "b": {"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                  d16, "overlap");
  // A long tensor followed by two short ones inside it (needs the running max, not just neighbours).
  expect_bad_file(dir, R"({"a": {"dtype":"U8","shape":[16],"data_offsets":[0,16]},
                           "b": {"dtype":"U8","shape":[2],"data_offsets":[2,4]},
                           "c": {"dtype":"U8","shape":[2],"data_offsets":[10,12]}})",
                  d16, "overlap");

  // As the format's reference loader: the spans tile the data section.
  // A gap between tensors, before the first, or an empty tensor away from
  // the others' ends:
  expect_bad_file(dir, R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]},
                           "b": {"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                  zeros(12), "bytes [4, 8) of the data section belong to no tensor (the next is 'b')");
  expect_bad_file(dir, R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", zeros(8),
                  "bytes [0, 4) of the data section belong to no tensor");
  expect_bad_file(dir, R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]},
                           "e": {"dtype":"F32","shape":[0],"data_offsets":[6,6]}})",
                  zeros(4), "past the end of file");
  // Bytes after the last tensor (appended, or a header length one short).
  expect_bad_file(dir, R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", zeros(5),
                  "1 bytes after the last tensor's data (the header says 4 of 5)");
  expect_bad_file(dir, R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", zeros(16),
                  "8 bytes after the last tensor's data");

  // Legal: adjacent spans in any header order, empty tensors at the others'
  // ends, 0-d scalars.
  const std::string p = dir / "ok.safetensors";
  write_file(p, st_bytes(R"({"c": {"dtype":"U8","shape":[2],"data_offsets":[8,10]},
                            "a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]},
                            "b": {"dtype":"F32","shape":[],"data_offsets":[4,8]},
                            "e1": {"dtype":"F32","shape":[0],"data_offsets":[8,8]},
                            "e2": {"dtype":"F32","shape":[5,0],"data_offsets":[8,8]},
                            "e3": {"dtype":"BF16","shape":[0],"data_offsets":[10,10]}})",
                         zeros(10)));
  SafetensorsFile f(p);
  EXPECT_EQ(f.tensors().size(), 6u);
  EXPECT_EQ(f.view(*f.find("b")).shape, Shape{});
  EXPECT_EQ(f.view(*f.find("e2")).nbytes(), 0u);
  for (size_t i = 1; i < f.tensors().size(); ++i) EXPECT_LE(f.tensors()[i - 1].begin, f.tensors()[i].begin);
}

TEST(SafetensorsValidation, Metadata) {
  TempDir dir;
  expect_bad_file(dir, R"({"__metadata__": [1]})", "", "\"__metadata__\" is not a JSON object");
  expect_bad_file(dir, R"({"__metadata__": {"format": 1}})", "", "value for 'format' is not a string");
  expect_bad_file(dir, R"({"__metadata__": {"format": {"a":"b"}}})", "", "not a string");
  const std::string p = dir / "ok.safetensors";
  write_file(p, st_bytes(R"({"__metadata__": {"format":"pt","k":""}})"));
  SafetensorsFile f(p);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"k", ""}}));
}

TEST(SafetensorsValidation, MessagesStayOnOneLine) {
  TempDir dir;
  // A tensor name with control characters must not break the message.
  expect_bad_file(dir, R"({"a\nb\u0001": {"dtype":"Q","shape":[1],"data_offsets":[0,1]}})", zeros(1), "'a\\x0ab\\x01'");
  expect_bad_file(dir, "{\n\"a\":\n", "", "not valid JSON");
}

// ---------------------------------------------------------------- fuzzing

namespace {

// A valid file with a varied header: several dtypes, an empty tensor and metadata.
std::string fuzz_seed_file(const TempDir& dir) {
  std::vector<float> a(6, 1.5f);
  std::vector<uint16_t> b(5, 0x3f80);
  std::vector<int8_t> c(7, -3);
  SafetensorsWriter w;
  w.add("model.a", DType::F32, {2, 3}, a.data());
  w.add("model.b", DType::BF16, {5}, b.data());
  w.add("model.c", DType::I8, {7}, c.data());
  w.add("model.e", DType::F16, {0, 3}, nullptr);
  w.add("s", DType::F32, {}, a.data());
  w.set_metadata("format", "pt");
  const std::string path = dir / "seed.safetensors";
  w.write(path);
  return read_file(path);
}

// What a successful open must satisfy, checked against the raw bytes.
void check_consistent(const SafetensorsFile& f, const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  ASSERT_LE(n, bytes.size() - 8);
  const uint64_t data_size = bytes.size() - 8 - n;
  const uint8_t* base = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& e : f.tensors()) {
    ASSERT_LE(e.begin, e.end);
    ASSERT_LE(e.end, data_size);
    auto v = f.view(e);
    ASSERT_EQ(v.nbytes(), e.end - e.begin);
    auto* p = static_cast<const uint8_t*>(v.data);
    if (!base) base = p - e.begin;
    ASSERT_EQ(p, base + e.begin) << "views disagree on where the data section starts";
    ASSERT_EQ(std::memcmp(p, bytes.data() + 8 + n + e.begin, v.nbytes()), 0);
    ASSERT_EQ(f.find(e.name), &e);
    if (e.end > e.begin) spans.emplace_back(e.begin, e.end);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) ASSERT_LE(spans[i - 1].second, spans[i].first);
  touch_all(f);
}

}  // namespace

TEST(SafetensorsFuzz, RandomCorruptionNeverCrashes) {
  TempDir dir;
  const std::string seed = fuzz_seed_file(dir);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | uint8_t(seed[size_t(i)]);
  const std::string path = dir / "fuzz.safetensors";
  const std::string interesting = "{}[]\",:-0123456789eE. \\x\xff";

  std::mt19937_64 rng(20240611);
  auto pick = [&](uint64_t n) { return n ? uint64_t(rng() % n) : 0; };
  int opened = 0, rejected = 0;
  for (int iter = 0; iter < 200; ++iter) {
    std::string bytes = seed;
    switch (iter % 5) {
      case 0:  // truncate anywhere
        bytes.resize(pick(bytes.size()));
        break;
      case 1:  // flip bits in the header
        for (int k = 0, m = 1 + int(pick(4)); k < m; ++k) bytes[8 + pick(hlen)] ^= char(1u << pick(8));
        break;
      case 2:  // write JSON-significant characters into the header
        for (int k = 0, m = 1 + int(pick(3)); k < m; ++k) bytes[8 + pick(hlen)] = interesting[pick(interesting.size())];
        break;
      case 3:  // damage the length prefix
        bytes[pick(8)] ^= char(1u << pick(8));
        break;
      case 4:  // anything anywhere, plus sometimes a truncated tail
        for (int k = 0, m = 1 + int(pick(8)); k < m; ++k) bytes[pick(bytes.size())] = char(rng());
        if (rng() % 2) bytes.resize(bytes.size() - pick(16));
        break;
    }
    write_file(path, bytes);
    SCOPED_TRACE("iteration " + std::to_string(iter));
    try {
      SafetensorsFile f(path);
      ++opened;
      check_consistent(f, bytes);
    } catch (const rinfer::Error& e) {
      ++rejected;
      std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-rinfer exception: " << e.what();
    }
  }
  EXPECT_EQ(opened + rejected, 200);
  EXPECT_GT(rejected, 50);
  EXPECT_GT(opened, 0);  // some corruptions (data bytes, padding) are harmless
}

// Every GGUF vocabulary of ../shared/testdata/tokenizer/llamacpp-vocab over
// the shared string set of tests/data/tokenizer_vectors (many scripts,
// emoji, digits, whitespace, code, special-token text), against the ids
// llama.cpp's own tokenizer gave (scripts/gen_llamacpp_tokenizer_vectors.py):
// add_special=false with parse_special=false (as test-tokenizer-0) and with
// parse_special=true. Exact match required.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using Ids = std::vector<int32_t>;

const std::filesystem::path kDir = std::filesystem::path(RINFER_SOURCE_DIR) / "tests/data/tokenizer_vectors";

std::vector<std::string> read_strings() {
  std::ifstream in(kDir / "strings.jsonl");
  if (!in) throw std::runtime_error("cannot read " + (kDir / "strings.jsonl").string());
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line).get<std::string>());
  return out;
}

Ids parse_ids(const std::string& s) {
  std::istringstream ls(s);
  Ids ids;
  for (int32_t id; ls >> id;) ids.push_back(id);
  return ids;
}

// A .ids file: "# llama.cpp ...", one line per string (parse_special=false),
// "# parse_special=true", then "<index>:<ids>" for the strings whose ids
// differ with parse_special=true.
struct Expected {
  std::vector<Ids> plain, special;
};

Expected read_expected(const std::string& vocab, size_t n) {
  const auto path = kDir / (vocab + ".ids");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  Expected e;
  std::string line;
  std::getline(in, line);
  if (!line.starts_with("# llama.cpp ")) throw std::runtime_error(path.string() + ": no header line");
  for (size_t i = 0; i < n; ++i) {
    if (!std::getline(in, line)) throw std::runtime_error(path.string() + ": fewer lines than strings");
    e.plain.push_back(parse_ids(line));
  }
  if (!std::getline(in, line) || line != "# parse_special=true")
    throw std::runtime_error(path.string() + ": no parse_special=true section after the strings");
  e.special = e.plain;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    const size_t i = std::stoul(line.substr(0, colon));
    if (colon == std::string::npos || i >= n) throw std::runtime_error(path.string() + ": bad line " + line);
    e.special[i] = parse_ids(line.substr(colon + 1));
  }
  return e;
}

// The string with non-printable and non-ASCII bytes as \xNN.
std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += char(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      out += b;
    }
  }
  return out;
}

std::string join(const Ids& ids) {
  std::string out;
  for (int32_t id : ids) out += " " + std::to_string(id);
  return out;
}

class LlamaCppVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVectors, MatchesLlamaCpp) {
  const auto tok = Tokenizer::load(
      test::testdata("tokenizer/llamacpp-vocab/ggml-vocab-" + GetParam() + ".gguf").string());
  const auto strings = read_strings();
  ASSERT_GE(strings.size(), 200u);
  const Expected want = read_expected(GetParam(), strings.size());
  for (const bool parse_special : {false, true}) {
    int failures = 0;
    for (size_t i = 0; i < strings.size(); ++i) {
      const Ids got = parse_special ? tok->encode(strings[i], false) : tok->encode_no_parse_special(strings[i], false);
      const Ids& expected = (parse_special ? want.special : want.plain)[i];
      if (got == expected) continue;
      if (++failures <= 5)
        ADD_FAILURE() << "parse_special=" << parse_special << " string " << i << ": \"" << escaped(strings[i])
                      << "\"\n  llama.cpp:" << join(expected) << "\n  rinfer:   " << join(got);
    }
    EXPECT_EQ(failures, 0) << "of " << strings.size() << " strings differ (parse_special=" << parse_special << ")";
  }
}

// Every .gguf of the folder (each has a .ids file here).
INSTANTIATE_TEST_SUITE_P(Gguf, LlamaCppVectors,
                         ::testing::Values("baichuan", "bert-bge", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2",
                                           "gpt-neox", "llama-spm", "mpt", "phi-3", "refact", "starcoder"),
                         test::vocab_test_name);

// The list above is the folder's: a vocabulary added there needs vectors here.
TEST(LlamaCppVectorsFiles, EveryGgufHasVectors) {
  for (const auto& e : std::filesystem::directory_iterator(test::testdata("tokenizer/llamacpp-vocab"))) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("ggml-vocab-") || !name.ends_with(".gguf")) continue;
    const std::string vocab = name.substr(11, name.size() - 11 - 5);
    EXPECT_TRUE(std::filesystem::exists(kDir / (vocab + ".ids"))) << vocab;
  }
}

}  // namespace
}  // namespace rinfer

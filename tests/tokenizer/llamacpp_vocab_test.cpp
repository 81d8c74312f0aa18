// GGUF vocabularies against llama.cpp's test vectors
// (../shared/testdata/tokenizer/llamacpp-vocab): every .inp/.out pair whose
// .gguf is present, with parse_special=false and no BOS, as llama.cpp's
// test-tokenizer-0 runs them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using Ids = std::vector<int32_t>;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The strings of a .inp file: each is followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> read_inputs(const std::filesystem::path& p) {
  const std::string all = slurp(p), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t i = 0; i < all.size();) {
    const size_t j = all.find(sep, i);
    if (j == std::string::npos) throw std::runtime_error(p.string() + ": no separator after the last string");
    out.push_back(all.substr(i, j - i));
    i = j + sep.size();
  }
  return out;
}

std::vector<Ids> read_outputs(const std::filesystem::path& p) {
  std::istringstream in(slurp(p));
  std::vector<Ids> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    Ids ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, MatchesTestVectors) {
  const auto dir = test::testdata("tokenizer/llamacpp-vocab");
  const std::string base = "ggml-vocab-" + GetParam() + ".gguf";
  const auto tok = Tokenizer::load((dir / base).string());
  const auto inputs = read_inputs(test::testdata("tokenizer/llamacpp-vocab/" + base + ".inp"));
  const auto outputs = read_outputs(test::testdata("tokenizer/llamacpp-vocab/" + base + ".out"));
  ASSERT_EQ(inputs.size(), outputs.size());
  ASSERT_EQ(inputs.size(), 46u);
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Ids got = tok->encode_no_parse_special(inputs[i], false);
    EXPECT_EQ(got, outputs[i]) << "case " << i << ": \"" << inputs[i] << "\"";
    failures += got != outputs[i];
  }
  EXPECT_EQ(failures, 0);
}

// Every vocabulary of the folder that has both a .gguf and test vectors.
INSTANTIATE_TEST_SUITE_P(Gguf, LlamaCppVocab,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "mpt", "falcon", "starcoder", "refact",
                                           "deepseek-coder", "deepseek-llm", "bert-bge"),
                         test::vocab_test_name);

// bert-bge (WordPiece): [CLS] ... [SEP] with special tokens, and decode
// joins the pieces back (lower-cased, as BERT's uncased normalizer left them).
TEST(Gguf, BertSpecialTokensAndDecode) {
  const auto tok = Tokenizer::load(test::testdata("tokenizer/llamacpp-vocab/ggml-vocab-bert-bge.gguf").string());
  const Ids plain = tok->encode("Hello World!", false);
  Ids want = {101};
  want.insert(want.end(), plain.begin(), plain.end());
  want.push_back(102);
  EXPECT_EQ(tok->encode("Hello World!", true), want);
  EXPECT_EQ(tok->decode(plain), "hello world!");
  EXPECT_EQ(tok->decode(want, true), "hello world!");
}

TEST(Gguf, BadFiles) {
  test::TempDir t;
  t.write("x.gguf", "GGUF\x03");
  test::expect_error([&] { Tokenizer::load((t.path() / "x.gguf").string()); }, "is truncated or not a GGUF file");
  t.write("y.gguf", "NOTAGGUFFILE....................");
  test::expect_error([&] { Tokenizer::load((t.path() / "y.gguf").string()); }, "is not a GGUF file");
}

// A GGUF vocabulary of a tokenizer model rinfer does not implement is a
// one-line error naming it.
TEST(Gguf, UnsupportedTokenizerModel) {
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) { return u64(s.size()) + s; };
  std::string f = "GGUF" + u32(3) + u64(0) + u64(2);
  f += str("tokenizer.ggml.model") + u32(8) + str("rwkv");                      // type 8: string
  f += str("tokenizer.ggml.tokens") + u32(9) + u32(8) + u64(1) + str("a");      // type 9: array of strings
  test::TempDir t;
  t.write("v.gguf", f);
  test::expect_error([&] { Tokenizer::load((t.path() / "v.gguf").string()); },
                     "unsupported GGUF tokenizer model \"rwkv\"");
}

TEST(Gguf, Metadata) {
  const auto m = read_gguf_metadata(test::testdata("tokenizer/llamacpp-vocab/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(std::get<std::string>(m.kv.at("tokenizer.ggml.model")), "gpt2");
  EXPECT_EQ(std::get<std::vector<std::string>>(m.kv.at("tokenizer.ggml.tokens")).size(), 50257u);
}

}  // namespace
}  // namespace rinfer

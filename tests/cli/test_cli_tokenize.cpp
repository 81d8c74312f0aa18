// tokenize / detokenize / chat-template through the binary, against the
// Hugging Face reference cases, plus their bad-input contract.
#include <fstream>

#include "cli/cli_util.h"

namespace rinfer::test::cli {
namespace {

std::vector<json> read_jsonl(const fs::path& p, size_t limit) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  std::vector<json> out;
  std::string line;
  while (out.size() < limit && std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

class TokenizeCli : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizeCli, FileIdsAndDetokenizeMatchTransformers) {
  const fs::path dir = testdata("tokenizer/hf/" + GetParam());
  TempDir tmp;
  int checked = 0;
  for (const auto& c : read_jsonl(dir / "cases.jsonl", 6)) {
    const std::string text = c["text"].get<std::string>();
    SCOPED_TRACE(text.substr(0, 40));
    write_bytes(tmp / "in.txt", text);
    json plain = run_json("tokenize --tokenizer " + quote(dir.string()) + " --file " + quote(tmp / "in.txt") + " --json");
    EXPECT_EQ(ids_of(plain, "ids"), c["ids"].get<std::vector<int32_t>>());
    json special = run_json("tokenize --tokenizer " + quote(dir.string()) + " --file " + quote(tmp / "in.txt") +
                            " --add-special --json");
    EXPECT_EQ(ids_of(special, "ids"), c["ids_with_special"].get<std::vector<int32_t>>());
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    if (ids.empty()) continue;
    CmdResult d = run_rinfer("detokenize --tokenizer " + quote(dir.string()) + " --ids " + join_ids(ids));
    ASSERT_EQ(d.code, 0) << d.err;
    // detokenize prints the text followed by one newline.
    EXPECT_EQ(d.out, c["decoded"].get<std::string>() + "\n");
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizeCli, ::testing::Values("llama2", "llama3", "qwen3", "deepseek_v3"));

TEST(ChatTemplateCli, RendersReferenceCasesByteForByte) {
  TempDir tmp;
  int checked = 0;
  for (const std::string fam : {"llama3", "qwen3", "deepseek_v3"}) {
    const fs::path dir = testdata("tokenizer/hf/" + fam);
    for (const auto& c : read_jsonl(dir / "chat_cases.jsonl", 8)) {
      SCOPED_TRACE(fam + ": " + c["messages"].dump().substr(0, 60));
      write_bytes(tmp / "conv.json", c["messages"].dump());
      json r = run_json("chat-template --model " + quote(dir.string()) + " --messages " + quote(tmp / "conv.json") +
                        (c["add_generation_prompt"].get<bool>() ? " --add-generation-prompt" : "") + " --json");
      EXPECT_EQ(r.value("prompt", std::string("<missing>")), c["rendered"].get<std::string>());
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24);
}

TEST(TokenizeCliErrors, OneLineErrors) {
  TempDir tmp;
  expect_fails("tokenize --tokenizer " + quote(tmp / "nope") + " --text hi", "nope");
  fs::create_directories(tmp.path / "bad");
  write_bytes(tmp.path / "bad" / "tokenizer.json", "{ not json");
  expect_fails("tokenize --tokenizer " + quote(tmp / "bad") + " --text hi", "tokenizer.json");
  fs::create_directories(tmp.path / "tpl");
  write_bytes(tmp.path / "tpl" / "tokenizer_config.json",
              R"({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}{% include 'x.j2' %}"})");
  write_bytes(tmp / "conv.json", R"([{"role": "user", "content": "hi"}])");
  expect_fails("chat-template --model " + quote(tmp / "tpl") + " --messages " + quote(tmp / "conv.json"), "include");
  expect_fails("detokenize --tokenizer " + quote(stories_hf()) + " --ids 1,99999", "99999");
}

}  // namespace
}  // namespace rinfer::test::cli

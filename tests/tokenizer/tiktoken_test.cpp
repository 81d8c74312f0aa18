// tiktoken vocabularies (Qwen-1's qwen.tiktoken, GLM-4's tokenizer.model).
// Nothing is downloaded: a tiktoken file is built in a temporary folder from
// the Qwen3 tokenizer.json of the shared test data. Qwen2/3's byte-level
// vocabulary is Qwen-1's tiktoken ranks written in the GPT-2 byte alphabet
// (rank = id for the 151643 non-added tokens), and Qwen3's pre-tokenizer
// regex is character for character Qwen-1's PAT_STR (both split digits one
// by one), and both normalize with NFC. So Qwen-1's rules on that file must
// give Qwen3's reference ids, except where the text holds one of Qwen3's
// added tokens that Qwen-1 does not have (only <|endoftext|>, <|im_start|>
// and <|im_end|> are shared, with the same ids 151643..151645).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/wait.h>

#include "tokenizer/tiktoken.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

std::string base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (bytes.size() - i == 1) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (bytes.size() - i == 2) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// GPT-2's bytes_to_unicode, inverted: code point → byte.
std::map<uint32_t, uint8_t> gpt2_unicode_to_byte() {
  std::map<uint32_t, uint8_t> m;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    m[printable ? uint32_t(b) : next++] = uint8_t(b);
  }
  return m;
}

// The raw bytes a byte-level vocabulary string stands for.
std::string byte_level_to_bytes(const std::string& s) {
  static const auto inv = gpt2_unicode_to_byte();
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = uint8_t(s[i]);
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c, len = 1;
    } else if (c < 0xE0) {
      cp = (c & 0x1Fu) << 6 | (uint8_t(s[i + 1]) & 0x3Fu), len = 2;
    } else {
      cp = (c & 0x0Fu) << 12 | (uint8_t(s[i + 1]) & 0x3Fu) << 6 | (uint8_t(s[i + 2]) & 0x3Fu), len = 3;
    }
    const auto it = inv.find(cp);
    if (it == inv.end()) throw std::runtime_error("not a byte-level string: " + s);
    out += char(it->second);
    i += len;
  }
  return out;
}

// qwen3's non-added vocabulary as a tiktoken file (lines in rank order).
const std::string& qwen_tiktoken_text() {
  static const std::string text = [] {
    const json j = test::read_json(test::testdata("tokenizer/hf/qwen3/tokenizer.json"));
    std::vector<std::string> by_rank(j["model"]["vocab"].size());
    for (const auto& [tok, id] : j["model"]["vocab"].items()) by_rank.at(id.get<size_t>()) = byte_level_to_bytes(tok);
    std::string t;
    for (size_t r = 0; r < by_rank.size(); ++r) t += base64(by_rank[r]) + " " + std::to_string(r) + "\n";
    return t;
  }();
  return text;
}

struct Case {
  std::string text, decoded;
  Ids ids;
};

// The qwen3 reference cases whose text holds no added token that Qwen-1
// lacks (see the top of the file).
std::vector<Case> shared_cases() {
  const json tj = test::read_json(test::testdata("tokenizer/hf/qwen3/tokenizer.json"));
  std::vector<std::string> qwen3_only;
  for (const auto& a : tj["added_tokens"]) {
    const std::string c = a["content"].get<std::string>();
    if (c != "<|endoftext|>" && c != "<|im_start|>" && c != "<|im_end|>") qwen3_only.push_back(c);
  }
  std::ifstream in(test::testdata("tokenizer/hf/qwen3/cases.jsonl"));
  std::vector<Case> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    Case k{c["text"].get<std::string>(), c["decoded"].get<std::string>(), c["ids"].get<Ids>()};
    bool skip = false;
    for (const auto& a : qwen3_only) skip |= k.text.find(a) != std::string::npos;
    if (!skip) out.push_back(std::move(k));
  }
  return out;
}

// A model directory with the qwen3-derived vocabulary under `file_name`.
void write_dir(const test::TempDir& t, const std::string& file_name, const std::string& cls) {
  t.write(file_name, qwen_tiktoken_text());
  if (!cls.empty()) t.write("tokenizer_config.json", json{{"tokenizer_class", cls}}.dump());
}

constexpr int32_t kRanks = 151643;

TEST(Tiktoken, QwenRulesMatchQwen3ReferenceIds) {
  test::TempDir t;
  write_dir(t, "qwen.tiktoken", "QWenTokenizer");
  const auto tok = Tokenizer::load(t.str());
  const auto cases = shared_cases();
  ASSERT_EQ(cases.size(), 86u);  // 87 cases; one of them ("<think>...") holds a Qwen3-only token
  int failures = 0;
  for (const auto& c : cases) {
    const Ids got = tok->encode(c.text, false);
    EXPECT_EQ(got, c.ids) << "\"" << c.text << "\"";
    failures += got != c.ids;
    EXPECT_EQ(tok->encode(c.text, true), c.ids) << "QWenTokenizer adds no special tokens";
    EXPECT_EQ(tok->decode(c.ids, false), c.decoded) << "\"" << c.text << "\"";
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(tok->vocab_size(), kRanks + 3 + 205);
  EXPECT_EQ(tok->eos_id(), kRanks);
  EXPECT_EQ(tok->bos_id(), -1);
}

TEST(Tiktoken, QwenSpecialTokensAreMatchedInText) {
  test::TempDir t;
  write_dir(t, "qwen.tiktoken", "");  // no config: the file name picks Qwen-1's rules
  const auto tok = Tokenizer::load(t.str());
  const Ids inner = tok->encode("user\nhi", false);
  Ids want = {kRanks + 1};
  want.insert(want.end(), inner.begin(), inner.end());
  want.push_back(kRanks + 2);
  want.push_back(kRanks + 3 + 204);
  EXPECT_EQ(tok->encode("<|im_start|>user\nhi<|im_end|><|extra_204|>", false), want);
  // Left as text, nothing at or above the first special id appears.
  for (int32_t id : tok->encode_no_parse_special("<|im_start|>user<|endoftext|>", false)) EXPECT_LT(id, kRanks);
  EXPECT_EQ(tok->decode(want, false), "<|im_start|>user\nhi<|im_end|><|extra_204|>");
  EXPECT_EQ(tok->decode(want, true), "user\nhi");
  EXPECT_TRUE(tok->is_special(kRanks));
  EXPECT_EQ(tok->id_to_piece(kRanks + 3), "<|extra_0|>");
}

TEST(Tiktoken, StreamingDecodeNeverBreaksCharacters) {
  test::TempDir t;
  write_dir(t, "qwen.tiktoken", "QWenTokenizer");
  const auto tok = Tokenizer::load(t.str());
  for (const auto& c : shared_cases()) {
    StreamingDetokenizer d(*tok, false);
    std::string streamed;
    for (int32_t id : c.ids) {
      const std::string piece = d.push(id);
      EXPECT_EQ(utf8::find_invalid(piece), std::string::npos);
      streamed += piece;
    }
    streamed += d.flush();
    EXPECT_EQ(streamed, c.decoded);
  }
}

TEST(Tiktoken, Glm4TokenizerModelIsDetectedByContent) {
  test::TempDir t;
  write_dir(t, "tokenizer.model", "ChatGLM4Tokenizer");
  const auto tok = Tokenizer::load(t.str());
  // Special ids from the number of ranks on, in tokenization_chatglm.py's order.
  const int32_t gmask = kRanks + 2, sop = kRanks + 4, user = kRanks + 7, assistant = kRanks + 8;
  const Ids hello = tok->encode("Hello world", false);
  ASSERT_FALSE(hello.empty());
  Ids want = {gmask, sop};
  want.insert(want.end(), hello.begin(), hello.end());
  EXPECT_EQ(tok->encode("Hello world", true), want);
  Ids chat = {user};
  const Ids body = tok->encode("\nHello world", false);
  chat.insert(chat.end(), body.begin(), body.end());
  chat.push_back(assistant);
  EXPECT_EQ(tok->encode("<|user|>\nHello world<|assistant|>", false), chat);
  EXPECT_EQ(tok->vocab_size(), kRanks + 14);
  EXPECT_EQ(tok->eos_id(), kRanks);
  // Without a config, a tiktoken tokenizer.model gets GLM-4's rules too.
  test::TempDir u;
  write_dir(u, "tokenizer.model", "");
  EXPECT_EQ(Tokenizer::load(u.str())->encode("Hi", true).front(), gmask);
}

// A hand-made vocabulary: every byte b has rank b, then "12" 256, "123" 257,
// "yz" 258, "xy" 259 (special tokens from 260).
std::string small_vocab() {
  std::string t;
  for (int b = 0; b < 256; ++b) t += base64(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
  t += base64("12") + " 256\n" + base64("123") + " 257\n" + base64("yz") + " 258\n" + base64("xy") + " 259\n";
  return t;
}

TEST(Tiktoken, DigitRulesAndLowestRankMerge) {
  test::TempDir t;
  t.write("qwen.tiktoken", small_vocab());
  t.write("tokenizer.model", small_vocab());
  const auto qwen = Tokenizer::load((t.path() / "qwen.tiktoken").string());
  const auto glm = Tokenizer::load((t.path() / "tokenizer.model").string());
  // Qwen-1 cuts digits one by one: '1' '2' '3' '4' are bytes 49..52.
  EXPECT_EQ(qwen->encode("1234", false), (Ids{49, 50, 51, 52}));
  // GLM-4 cuts runs of up to three digits: "123" is a token, then "4".
  EXPECT_EQ(glm->encode("1234", false), (Ids{257, 52}));
  EXPECT_EQ(glm->encode("12345", false), (Ids{257, 52, 53}));
  // "xyz" is not a token: of the pairs "xy" (259) and "yz" (258) the lower
  // rank merges first, leaving 'x' (120) and "yz".
  EXPECT_EQ(qwen->encode("xyz", false), (Ids{120, 258}));
  EXPECT_EQ(qwen->encode("xy", false), (Ids{259}));
  EXPECT_EQ(qwen->encode("<|endoftext|>", false), (Ids{260}));
  EXPECT_EQ(glm->encode("", true), (Ids{260 + 2, 260 + 4}));
}

TEST(Tiktoken, BadFiles) {
  test::TempDir t;
  const std::string head = base64("a") + " 0\n";
  t.write("b64.tiktoken", head + "!!!! 1\n");
  test::expect_error([&] { Tokenizer::load((t.path() / "b64.tiktoken").string()); },
                     "line 2: \"!!!!\" is not valid base64");
  t.write("rank.tiktoken", head + base64("b") + " 1x\n");
  test::expect_error([&] { Tokenizer::load((t.path() / "rank.tiktoken").string()); },
                     "line 2: rank \"1x\" is not a non-negative integer");
  t.write("neg.tiktoken", head + base64("b") + " -1\n");
  test::expect_error([&] { Tokenizer::load((t.path() / "neg.tiktoken").string()); }, "rank \"-1\" is not");
  t.write("fields.tiktoken", head + base64("b") + "\n");
  test::expect_error([&] { Tokenizer::load((t.path() / "fields.tiktoken").string()); },
                     "line 2 is not \"<base64> <rank>\"");
  t.write("dup.tiktoken", head + base64("b") + " 0\n");
  test::expect_error([&] { Tokenizer::load((t.path() / "dup.tiktoken").string()); }, "rank 0 is listed twice");
  t.write("bytes.tiktoken", head);
  test::expect_error([&] { Tokenizer::load((t.path() / "bytes.tiktoken").string()); },
                     "the single byte 0 has no rank");
  t.write("tokenizer_config.json", json{{"tokenizer_class", "GPT2Tokenizer"}}.dump());
  t.write("tokenizer.model", small_vocab());
  test::expect_error([&] { Tokenizer::load(t.str()); }, "tokenizer_class \"GPT2Tokenizer\" is not one");
}

struct CmdRun {
  int code = -1;
  std::string out, err;
};

// `rinfer ARGS` through the shell; stdout and stderr captured.
CmdRun run_rinfer(const test::TempDir& t, const std::string& args) {
  const auto err_file = t.path() / "stderr.txt";
  const std::string cmd = std::string(RINFER_BIN) + " " + args + " 2>'" + err_file.string() + "'";
  CmdRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

// `rinfer tokenize --tokenizer DIR` on qwen.tiktoken / GLM-4 directories.
TEST(Tiktoken, CliTokenize) {
  test::TempDir t;
  write_dir(t, "qwen.tiktoken", "QWenTokenizer");
  const auto cases = shared_cases();
  // Every shared case in one --jsonl run.
  std::string jsonl;
  for (const auto& c : cases) jsonl += json{{"text", c.text}}.dump() + "\n";
  t.write("in.jsonl", jsonl);
  const CmdRun r =
      run_rinfer(t, "tokenize --tokenizer '" + t.str() + "' --jsonl '" + (t.path() / "in.jsonl").string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    ASSERT_LT(i, cases.size());
    EXPECT_EQ(json::parse(line).at("ids").get<Ids>(), cases[i].ids) << cases[i].text;
  }
  EXPECT_EQ(i, cases.size());
  // --text --json on a GLM-4 directory, with [gMASK] <sop>.
  test::TempDir g;
  write_dir(g, "tokenizer.model", "ChatGLM4Tokenizer");
  const CmdRun s = run_rinfer(g, "tokenize --tokenizer '" + g.str() + "' --text 'Hello world' --add-special --json");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(json::parse(s.out).at("ids").get<Ids>(), (Ids{kRanks + 2, kRanks + 4, 9707, 1879}))
      << "Hello world is [9707, 1879] in qwen3's cases";
  // A corrupt vocabulary: exit 1, one line naming the problem.
  test::TempDir b;
  b.write("qwen.tiktoken", base64("a") + " 0\n" + base64("b") + " one\n");
  const CmdRun e = run_rinfer(b, "tokenize --tokenizer '" + b.str() + "' --text hi");
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.out, "");
  EXPECT_NE(e.err.find("line 2: rank \"one\" is not a non-negative integer"), std::string::npos) << e.err;
  EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
}

}  // namespace
}  // namespace rinfer

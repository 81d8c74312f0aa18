#include "tokenizer/tiktoken.h"

#include <algorithm>
#include <fstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pipeline_tokenizer.h"

namespace rinfer {

namespace fs = std::filesystem;

namespace {

// The pre-tokenizer regexes of tokenization_qwen.py and GLM-4's
// tokenization_chatglm.py (they differ in the digits: one, or up to three).
constexpr const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGlm4Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict standard base64 (with padding, as Python's b64encode writes it);
// false when s is not.
bool b64_decode(std::string_view s, std::string* out) {
  out->clear();
  if (s.empty() || s.size() % 4 != 0) return false;
  size_t pad = 0;
  while (pad < 2 && s[s.size() - 1 - pad] == '=') ++pad;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < s.size() - pad; ++i) {
    const int v = b64_value(s[i]);
    if (v < 0) return false;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((acc >> bits) & 0xFF));
    }
  }
  // Leftover bits of the last character must be zero (canonical form).
  return (acc & ((1u << bits) - 1)) == 0;
}

bool is_b64_char(char c) { return b64_value(c) >= 0 || c == '='; }

std::vector<std::string> special_tokens(TiktokenFamily f) {
  if (f == TiktokenFamily::Glm4)
    return {"<|endoftext|>", "[MASK]",           "[gMASK]",          "[sMASK]",          "<sop>",
            "<eop>",         "<|system|>",       "<|user|>",         "<|assistant|>",    "<|observation|>",
            "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>"};
  std::vector<std::string> v = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 205; ++i) v.push_back("<|extra_" + std::to_string(i) + "|>");
  return v;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  RINFER_CHECK(in, "tokenizer: cannot read ", file.string());
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

bool is_tiktoken_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::string head(256, '\0');
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  const size_t nl = head.find('\n');
  if (nl == std::string::npos && head.size() == 256) return false;  // no line break in a long prefix
  std::string_view line = std::string_view(head).substr(0, nl);
  if (line.ends_with('\r')) line.remove_suffix(1);
  const size_t sp = line.find(' ');
  if (sp == 0 || sp == std::string_view::npos || sp + 1 == line.size()) return false;
  return std::all_of(line.begin(), line.begin() + std::ptrdiff_t(sp), is_b64_char) &&
         std::all_of(line.begin() + std::ptrdiff_t(sp) + 1, line.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::pair<std::string, int32_t>> parse_tiktoken(std::string_view text, const std::string& name) {
  std::vector<std::pair<std::string, int32_t>> out;
  std::unordered_set<std::string> seen_tokens;
  std::unordered_set<int32_t> seen_ranks;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    RINFER_CHECK(sp != std::string_view::npos && line.find(' ', sp + 1) == std::string_view::npos,
                 "tokenizer: ", name, ": line ", line_no, " is not \"<base64> <rank>\"");
    const std::string_view b64 = line.substr(0, sp), rank_s = line.substr(sp + 1);
    std::string bytes;
    RINFER_CHECK(b64_decode(b64, &bytes), "tokenizer: ", name, ": line ", line_no, ": \"",
                 std::string(b64.substr(0, 40)), "\" is not valid base64");
    int64_t rank = 0;
    bool ok = !rank_s.empty() && rank_s.size() <= 9;
    for (char c : rank_s) {
      if (c < '0' || c > '9') ok = false;
      rank = rank * 10 + (c - '0');
    }
    RINFER_CHECK(ok && rank < (1 << 24), "tokenizer: ", name, ": line ", line_no, ": rank \"",
                 std::string(rank_s.substr(0, 20)), "\" is not a non-negative integer below 2^24");
    RINFER_CHECK(seen_tokens.insert(bytes).second, "tokenizer: ", name, ": line ", line_no,
                 ": the token is listed twice");
    RINFER_CHECK(seen_ranks.insert(int32_t(rank)).second, "tokenizer: ", name, ": line ", line_no, ": rank ",
                 rank, " is listed twice");
    out.emplace_back(std::move(bytes), int32_t(rank));
  }
  RINFER_CHECK(!out.empty(), "tokenizer: ", name, " has no tokens");
  return out;
}

std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const fs::path& file, const HfTokenizerConfig& cfg) {
  const std::string& cls = cfg.tokenizer_class;
  if (cls == "QWenTokenizer") return load_tiktoken_tokenizer(file, cfg, TiktokenFamily::Qwen);
  if (cls == "ChatGLM4Tokenizer") return load_tiktoken_tokenizer(file, cfg, TiktokenFamily::Glm4);
  RINFER_CHECK(cls.empty(), "tokenizer: ", file.string(), " is a tiktoken vocabulary, but tokenizer_class \"", cls,
               "\" is not one whose rules rinfer knows (QWenTokenizer, ChatGLM4Tokenizer)");
  return load_tiktoken_tokenizer(file, cfg,
                                 file.filename() == "tokenizer.model" ? TiktokenFamily::Glm4 : TiktokenFamily::Qwen);
}

std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const fs::path& file, const HfTokenizerConfig& cfg,
                                                   TiktokenFamily family) {
  const std::string name = file.string();
  const auto ranks = parse_tiktoken(read_file(file), name);

  // The BPE model works on the GPT-2 byte alphabet (one character per
  // byte), like the tokenizer.json files converted from these vocabularies;
  // the ByteLevel pre-tokenizer and decoder translate.
  TokenMap vocab;
  vocab.reserve(ranks.size());
  int32_t max_rank = -1;
  for (const auto& [bytes, rank] : ranks) {
    std::string s;
    byte_level::encode(bytes, &s);
    vocab.emplace(std::move(s), rank);
    max_rank = std::max(max_rank, rank);
  }
  for (int b = 0; b < 256; ++b) {
    std::string s;
    byte_level::encode(std::string(1, char(b)), &s);
    RINFER_CHECK(vocab.count(s), "tokenizer: ", name, ": the single byte ", b,
                 " has no rank (tiktoken needs all 256 bytes)");
  }
  // tiktoken merges the pair whose concatenation has the lowest rank: BPE by
  // scores with score = -rank, every split of a token into two tokens being
  // a merge. A piece that is a token is taken whole (ignore_merges).
  std::vector<float> scores(size_t(max_rank) + 1, 0.0f);
  for (const auto& [bytes, rank] : ranks) scores[size_t(rank)] = -float(rank);
  std::vector<bool> mergeable(scores.size(), true);
  BpeModel::Options o;
  o.ignore_merges = true;

  TokenizerPipeline p;
  p.model = std::make_unique<BpeModel>(std::move(vocab), scores, mergeable, std::move(o));
  if (family == TiktokenFamily::Qwen) p.normalizer = make_normalizer(nlohmann::json{{"type", "NFC"}});
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(make_isolated_split(family == TiktokenFamily::Qwen ? kQwenPattern : kGlm4Pattern));
  steps.push_back(make_byte_level(false, false));
  p.pre_tokenizer = make_sequence(std::move(steps));
  p.decoder = make_byte_level_decoder();

  // Special tokens: ids from the number of ranks on, matched in text (Qwen's
  // tokenize allows all of them; GLM-4's config lists them as added tokens).
  const auto specials = special_tokens(family);
  const auto first = int32_t(ranks.size());
  for (size_t i = 0; i < specials.size(); ++i) {
    const int32_t id = first + int32_t(i);
    RINFER_CHECK(!p.model->id_to_token(id), "tokenizer: ", name, ": rank ", id, " is also the id of special token ",
                 specials[i], " (ranks must be 0..", ranks.size() - 1, ")");
    AddedToken t;
    t.content = specials[i];
    t.id = id;
    t.special = true;
    p.added.add(t);
  }
  // The config's added tokens (GLM-4's added_tokens_decoder repeats the
  // specials) join with their own switches when new.
  for (const auto& [id, spec] : cfg.added_tokens) {
    if (p.added.by_content(spec.content)) continue;
    RINFER_CHECK(!p.model->id_to_token(id) || *p.model->id_to_token(id) == spec.content, "tokenizer: added token \"",
                 spec.content, "\" has id ", id, ", which is a different token of ", name);
    p.added.add({spec.content, id, spec.special, spec.lstrip, spec.rstrip, spec.single_word, false});
  }
  auto id_of = [&](const HfTokenizerConfig::Role& r, const char* dflt) -> int32_t {
    const std::string content = r.present ? (r.token ? r.token->content : std::string()) : std::string(dflt);
    if (content.empty()) return -1;
    const AddedToken* t = p.added.by_content(content);
    RINFER_CHECK(t, "tokenizer: special token \"", content, "\" is not in ", name);
    return t->id;
  };
  p.eos = id_of(cfg.eos, "<|endoftext|>");
  p.bos = id_of(cfg.bos, "");  // neither family has a BOS token
  if (family == TiktokenFamily::Glm4) {
    // ChatGLM4Tokenizer.build_inputs_with_special_tokens: [gMASK] <sop> first.
    p.post.prefix = {p.added.by_content("[gMASK]")->id, p.added.by_content("<sop>")->id};
  }
  if (p.eos >= 0) p.eos_ids.push_back(p.eos);
  for (int32_t id : cfg.eos_token_ids)
    if (std::find(p.eos_ids.begin(), p.eos_ids.end(), id) == p.eos_ids.end()) p.eos_ids.push_back(id);
  p.clean_up_tokenization_spaces = cfg.clean_up_tokenization_spaces;
  p.split_special_tokens = cfg.split_special_tokens;
  return make_pipeline_tokenizer(std::move(p));
}

}  // namespace rinfer

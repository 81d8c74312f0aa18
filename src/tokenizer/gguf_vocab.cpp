#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/gguf_wordpiece.h"
#include "tokenizer/pipeline_tokenizer.h"

namespace rinfer {

namespace fs = std::filesystem;

namespace {

// A bounds-checked cursor over the file's bytes.
class Reader {
 public:
  Reader(std::string data, std::string name) : d_(std::move(data)), name_(std::move(name)) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = pod<uint64_t>();
    need(n);
    std::string s = d_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void need(uint64_t n) const {
    RINFER_CHECK(n <= d_.size() - pos_, "tokenizer: ", name_, " is truncated or not a GGUF file");
  }
  const std::string& name() const { return name_; }

 private:
  std::string d_;
  size_t pos_ = 0;
  std::string name_;
};

enum GgufType : uint32_t {
  kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64
};

// Scalars of every integer width as int64, floats as double.
GgufMetadata::Value read_scalar(Reader& r, uint32_t t) {
  switch (t) {
    case kU8: return int64_t(r.pod<uint8_t>());
    case kI8: return int64_t(r.pod<int8_t>());
    case kU16: return int64_t(r.pod<uint16_t>());
    case kI16: return int64_t(r.pod<int16_t>());
    case kU32: return int64_t(r.pod<uint32_t>());
    case kI32: return int64_t(r.pod<int32_t>());
    case kU64: return int64_t(r.pod<uint64_t>());
    case kI64: return r.pod<int64_t>();
    case kF32: return double(r.pod<float>());
    case kF64: return r.pod<double>();
    case kBool: return r.pod<uint8_t>() != 0;
    case kString: return r.str();
    default: fail("tokenizer: ", r.name(), ": unknown GGUF value type ", t);
  }
}

GgufMetadata::Value read_value(Reader& r, uint32_t t) {
  if (t != kArray) return read_scalar(r, t);
  const uint32_t et = r.pod<uint32_t>();
  const uint64_t n = r.pod<uint64_t>();
  r.need(n);  // every element takes at least one byte
  if (et == kString) {
    std::vector<std::string> v;
    v.reserve(n);
    for (uint64_t i = 0; i < n; ++i) v.push_back(r.str());
    return v;
  }
  RINFER_CHECK(et != kArray, "tokenizer: ", r.name(), ": nested GGUF arrays are not supported");
  if (et == kF32 || et == kF64) {
    std::vector<double> v;
    v.reserve(n);
    for (uint64_t i = 0; i < n; ++i) v.push_back(std::get<double>(read_scalar(r, et)));
    return v;
  }
  std::vector<int64_t> v;
  v.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    auto x = read_scalar(r, et);
    v.push_back(std::holds_alternative<bool>(x) ? int64_t(std::get<bool>(x)) : std::get<int64_t>(x));
  }
  return v;
}

template <typename T>
const T* get(const GgufMetadata& m, const std::string& key) {
  auto it = m.kv.find(key);
  return it == m.kv.end() ? nullptr : std::get_if<T>(&it->second);
}

// llama.cpp's token types.
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Pre-tokenizer regexes by tokenizer.ggml.pre, from the tokenizer.json
// files of the models llama.cpp names (split in order, each Isolated; the
// ByteLevel step follows).
std::vector<std::string> pre_regexes(const std::string& pre, const std::string& file) {
  const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre == "gpt-2" || pre == "mpt" || pre == "olmo") return {gpt2};
  // llama.cpp's list for a missing or "default" pre-tokenizer (gpt-neox's files have none).
  if (pre == "default" || pre.empty())
    return {R"([\p{P}\$\+<=>\^~\|]+)", gpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  if (pre == "llama-bpe" || pre == "llama3" || pre == "dbrx" || pre == "smaug-bpe") return {llama3};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return {qwen2};
  if (pre == "starcoder" || pre == "refact" || pre == "command-r") return {"\\p{N}", gpt2};
  if (pre == "falcon") return {R"([\p{P}\$\+<=>\^~\|`]+)", gpt2, "[0-9][0-9][0-9]"};
  if (pre == "deepseek-coder")
    return {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"};
  if (pre == "deepseek-llm")
    return {"[\r\n]",
            // Cased letters, written as escapes: a normalizing editor would
            // turn some of these characters into others (U+1FD3 → U+0390).
            "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
            "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"};
  if (pre == "deepseek-v3")
    return {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
            "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
  fail("tokenizer: ", file, ": unsupported GGUF pre-tokenizer \"", pre, "\"");
}

// The token types llama.cpp goes by: the file's, after the rules its loader
// applies by token text (llama_vocab::impl::load), which decide what
// parse_special=false leaves as text. Where llama.cpp takes the first of
// several texts of one group (in hash-map order), every one is taken here.
std::vector<int64_t> llamacpp_token_types(const GgufMetadata& m, const std::vector<std::string>& tokens,
                                          const std::vector<int64_t>* file_types) {
  std::vector<int64_t> t = file_types ? *file_types : std::vector<int64_t>(tokens.size(), kNormal);
  auto has_id = [&](const char* key) { return get<int64_t>(m, key) != nullptr; };
  // Texts that become CONTROL when the file names no token of their role.
  struct Group {
    std::vector<const char*> keys;
    std::vector<std::string_view> texts;
  };
  const Group groups[] = {
      {{"tokenizer.ggml.eot_token_id"},
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
        "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
      {{"tokenizer.ggml.eom_token_id"}, {"<|eom_id|>"}},
      {{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
        "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
      {{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
        "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
      {{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
        "▁<MID>", "<|code_middle|>", "<|middle|>"}},
      {{"tokenizer.ggml.fim_pad_token_id"}, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {{"tokenizer.ggml.fim_rep_token_id"}, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {{"tokenizer.ggml.fim_sep_token_id"}, {"<|file_sep|>"}},
  };
  // End-of-generation texts: CONTROL whatever the file says.
  const std::string_view eog[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
      "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
      "<｜end▁of▁sentence｜>", "[e~["};
  std::unordered_map<std::string_view, size_t> id_of;
  for (size_t id = 0; id < tokens.size(); ++id) id_of.try_emplace(tokens[id], id);
  auto find = [&](std::string_view text) -> int64_t {
    auto it = id_of.find(text);
    return it == id_of.end() ? -1 : int64_t(it->second);
  };
  for (const Group& g : groups) {
    if (std::any_of(g.keys.begin(), g.keys.end(), has_id)) continue;
    for (std::string_view text : g.texts)
      if (const int64_t id = find(text); id >= 0) t[size_t(id)] = kControl;
  }
  for (std::string_view text : eog)
    if (const int64_t id = find(text); id >= 0) t[size_t(id)] = kControl;
  // gpt-oss's and solar-open's exceptions: rendered as text, or not an end of generation.
  for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
    if (const int64_t id = find(text); id >= 0) t[size_t(id)] = kUserDefined;
  if (const int64_t end = find("<|end|>");
      end >= 0 && ((find("<|return|>") >= 0 && find("<|call|>") >= 0) ||
                   (find("<|calls|>") >= 0 && find("<|flush|>") >= 0)))
    t[size_t(end)] = kUserDefined;
  if (const int64_t eos = find("</s>"); eos >= 0 && find("<|tool_response>") >= 0) t[size_t(eos)] = kNormal;
  return t;
}

}  // namespace

GgufMetadata read_gguf_metadata(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  RINFER_CHECK(in, "tokenizer: cannot read ", file.string());
  std::string data((std::istreambuf_iterator<char>(in)), {});
  Reader r(std::move(data), file.string());
  r.need(4);
  RINFER_CHECK(r.pod<uint32_t>() == 0x46554747, "tokenizer: ", file.string(), " is not a GGUF file");  // "GGUF"
  const uint32_t version = r.pod<uint32_t>();
  RINFER_CHECK(version == 2 || version == 3, "tokenizer: ", file.string(), ": unsupported GGUF version ", version);
  r.pod<uint64_t>();  // tensor count
  const uint64_t n_kv = r.pod<uint64_t>();
  GgufMetadata m;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.str();
    const uint32_t t = r.pod<uint32_t>();
    m.kv[std::move(key)] = read_value(r, t);
  }
  return m;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const fs::path& file) {
  const GgufMetadata m = read_gguf_metadata(file);
  const std::string name = file.string();
  const auto* model = get<std::string>(m, "tokenizer.ggml.model");
  const auto* tokens = get<std::vector<std::string>>(m, "tokenizer.ggml.tokens");
  RINFER_CHECK(model && tokens, "tokenizer: ", name, " has no tokenizer.ggml.model / tokenizer.ggml.tokens");
  const auto* file_types = get<std::vector<int64_t>>(m, "tokenizer.ggml.token_type");
  const size_t n = tokens->size();
  RINFER_CHECK(n > 0 && n < (1u << 24), "tokenizer: ", name, ": implausible vocabulary size ", n);
  RINFER_CHECK(!file_types || file_types->size() == n, "tokenizer: ", name,
               ": token_type and tokens differ in length");
  const std::vector<int64_t> types = llamacpp_token_types(m, *tokens, file_types);
  auto type_of = [&](size_t id) { return types[id]; };
  auto id_key = [&](const char* key) -> int32_t {
    const auto* v = get<int64_t>(m, key);
    return v && *v >= 0 && *v < int64_t(n) ? int32_t(*v) : -1;
  };

  // llama.cpp's strip rules, by model name, pre-tokenizer or architecture.
  auto lowered = [&](const char* key) {
    const auto* v = get<std::string>(m, key);
    std::string s = v ? *v : std::string();
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string model_name = lowered("general.name"), pre_name = lowered("tokenizer.ggml.pre"),
                    arch = lowered("general.architecture");
  auto contains_any = [](const std::string& s, std::initializer_list<std::string_view> parts) {
    return std::any_of(parts.begin(), parts.end(), [&](std::string_view x) { return s.find(x) != std::string::npos; });
  };
  bool phi3 = false;  // every special token strips the whitespace after it, but <unk>, <s>, <|endoftext|>
  std::string_view lstrip_token;
  if (contains_any(pre_name, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"}))
    lstrip_token = "<mask>";
  else if (contains_any(model_name, {"phi-3", "phi3"}))
    phi3 = true;
  else if (contains_any(model_name, {"modern-bert"}))
    lstrip_token = "[MASK]";

  TokenizerPipeline p;
  TokenMap vocab;
  vocab.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    vocab.try_emplace((*tokens)[id], int32_t(id));
    const int64_t t = type_of(id);
    if (t == kControl || t == kUnknown || t == kUserDefined) {
      AddedToken a;
      a.content = (*tokens)[id];
      a.id = int32_t(id);
      a.special = t != kUserDefined;
      a.strip_ascii = true;
      a.rstrip = phi3 && a.content != "<unk>" && a.content != "<s>" && a.content != "<|endoftext|>";
      a.lstrip = a.content == lstrip_token;
      p.added.add(a);
    }
  }
  BpeModel::Options o;
  const auto* add_bos = get<bool>(m, "tokenizer.ggml.add_bos_token");
  const auto* add_eos = get<bool>(m, "tokenizer.ggml.add_eos_token");
  p.bos = id_key("tokenizer.ggml.bos_token_id");
  p.eos = id_key("tokenizer.ggml.eos_token_id");
  bool default_bos = false;
  if (*model == "llama") {
    const auto* scores = get<std::vector<double>>(m, "tokenizer.ggml.scores");
    RINFER_CHECK(scores && scores->size() == n, "tokenizer: ", name, " has no tokenizer.ggml.scores for every token");
    std::vector<float> s(scores->begin(), scores->end());
    std::vector<bool> mergeable(n);
    for (size_t id = 0; id < n; ++id) mergeable[id] = type_of(id) == kNormal;
    o.byte_fallback = true;
    o.fuse_unk = true;
    o.unk_id = id_key("tokenizer.ggml.unknown_token_id");
    p.model = std::make_unique<BpeModel>(std::move(vocab), s, mergeable, std::move(o));
    const auto* prefix = get<bool>(m, "tokenizer.ggml.add_space_prefix");
    p.normalizer = make_sentencepiece_normalizer(!prefix || *prefix);
    p.decoder = make_sentencepiece_decoder(!prefix || *prefix);
    default_bos = true;
  } else if (*model == "gpt2") {
    const auto* merges = get<std::vector<std::string>>(m, "tokenizer.ggml.merges");
    RINFER_CHECK(merges, "tokenizer: ", name, " has no tokenizer.ggml.merges");
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve(merges->size());
    for (const auto& s : *merges) {
      const size_t sp = s.find(' ', 1);
      RINFER_CHECK(sp != std::string::npos, "tokenizer: ", name, ": merge \"", s, "\" is not two tokens");
      pairs.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
    p.model = std::make_unique<BpeModel>(std::move(vocab), pairs, std::move(o));
    const auto* pre = get<std::string>(m, "tokenizer.ggml.pre");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& re : pre_regexes(pre ? *pre : std::string(), name)) steps.push_back(make_isolated_split(re));
    steps.push_back(make_byte_level(false, false));
    p.pre_tokenizer = make_sequence(std::move(steps));
    p.decoder = make_byte_level_decoder();
  } else if (*model == "bert") {
    // WordPiece. llama.cpp's converter wrote word-initial pieces with a
    // leading "▁" and continuation pieces without their "##"; this is the
    // Hugging Face vocabulary again (control tokens stay as they are).
    constexpr std::string_view kSpace = "▁";
    TokenMap wp;
    wp.reserve(n);
    for (size_t id = 0; id < n; ++id) {
      const std::string& t = (*tokens)[id];
      const int64_t ty = type_of(id);
      std::string piece = ty == kControl || ty == kUnknown || ty == kUserDefined ? t
                          : t.starts_with(kSpace)                                  ? t.substr(kSpace.size())
                                                                                   : "##" + t;
      wp.try_emplace(std::move(piece), int32_t(id));
    }
    const int32_t unk = id_key("tokenizer.ggml.unknown_token_id");
    RINFER_CHECK(unk >= 0, "tokenizer: ", name, ": a bert vocabulary needs tokenizer.ggml.unknown_token_id");
    p.model = std::make_unique<LlamaCppWordPiece>(*tokens, std::move(wp), (*tokens)[size_t(unk)]);
    // llama.cpp's own text preparation, not BertNormalizer's (gguf_wordpiece.h).
    const auto* lower = get<bool>(m, "tokenizer.ggml.normalizer.lowercase");
    const auto* strip = get<bool>(m, "tokenizer.ggml.normalizer.strip_accents");
    const bool lowercase = !lower || *lower;
    p.pre_tokenizer = make_llamacpp_wordpiece_pre_tokenizer(lowercase, strip ? *strip : lowercase);
    p.decoder = make_wordpiece_decoder("##", true);
    // [CLS] text [SEP] with special tokens.
    const int32_t cls = id_key("tokenizer.ggml.cls_token_id"), sep = id_key("tokenizer.ggml.seperator_token_id");
    if (p.bos < 0) p.bos = cls;
    if (p.eos < 0) p.eos = sep;
    default_bos = true;
    if (!(add_eos && !*add_eos) && sep >= 0) p.post.suffix.push_back(sep);
    add_eos = nullptr;
  } else {
    fail("tokenizer: ", name, ": unsupported GGUF tokenizer model \"", *model,
         "\" (rinfer reads \"llama\", \"gpt2\" and \"bert\")");
  }
  if ((add_bos ? *add_bos : default_bos) && p.bos >= 0) p.post.prefix.push_back(p.bos);
  if (add_eos && *add_eos && p.eos >= 0) p.post.suffix.push_back(p.eos);
  if (p.eos >= 0) p.eos_ids.push_back(p.eos);
  return make_pipeline_tokenizer(std::move(p));
}

}  // namespace rinfer

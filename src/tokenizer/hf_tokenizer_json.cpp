#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/json_util.h"
#include "tokenizer/pipeline_tokenizer.h"
#include "tokenizer/unigram_model.h"
#include "tokenizer/wordpiece_model.h"

namespace rinfer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// tokenizer.json as parsed for the pipeline. The model's "vocab" object and
// "merges" list (a LLaMA-3 file has 128K of each) go straight into the
// structures the models keep, without a JSON tree of them: building and
// walking that tree was most of the load time. Everything else is a tree.
struct TokenizerJson {
  json doc;
  bool has_vocab = false;  // model.vocab was an object: it is here, not in doc
  std::vector<std::pair<std::string, int32_t>> vocab_entries;  // in file order
  bool has_merges = false;  // model.merges was a list: it is in `merges`, not in doc
  std::vector<std::pair<std::string, std::string>> merges;
};

// A SAX handler that builds the tree like nlohmann's DOM parser, except for
// the two captured members (errors there stop the parse with a message).
class TokenizerJsonSax {
 public:
  explicit TokenizerJsonSax(TokenizerJson* out) : out_(out) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) {
    if (mode_ == Mode::Vocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::Vocab) return vocab_id(v <= uint64_t(INT64_MAX) ? int64_t(v) : -1);
    return value(json(v));
  }
  bool number_float(json::number_float_t v, const std::string&) { return value(json(v)); }
  bool string(std::string& v) {
    if (mode_ == Mode::Merges) {
      const size_t sp = v.find(' ', 1);
      if (sp == std::string::npos) return error("merge \"" + v + "\" is not two tokens");
      out_->merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      return true;
    }
    if (mode_ == Mode::MergePair) {
      if (pair_n_ >= 2) return error(kBadMerge);
      (pair_n_++ == 0 ? pair_.first : pair_.second) = std::move(v);
      return true;
    }
    return value(json(std::move(v)));
  }
  bool binary(json::binary_t& v) { return value(json(json::binary_t(std::move(v)))); }

  bool start_object(size_t) {
    if (mode_ != Mode::None) return mode_ == Mode::Vocab ? error(vocab_error()) : error(kBadMerge);
    if (at_model_member("vocab")) {
      mode_ = Mode::Vocab;
      out_->has_vocab = true;
      return true;
    }
    return open(json::object());
  }
  bool end_object() {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::None;
      return true;
    }
    return close();
  }
  bool start_array(size_t) {
    if (mode_ == Mode::Merges) {
      mode_ = Mode::MergePair;
      pair_n_ = 0;
      return true;
    }
    if (mode_ != Mode::None) return mode_ == Mode::Vocab ? error(vocab_error()) : error(kBadMerge);
    if (at_model_member("merges")) {
      mode_ = Mode::Merges;
      out_->has_merges = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() {
    if (mode_ == Mode::MergePair) {
      if (pair_n_ != 2) return error(kBadMerge);
      out_->merges.push_back(std::move(pair_));
      pair_ = {};
      mode_ = Mode::Merges;
      return true;
    }
    if (mode_ == Mode::Merges) {
      mode_ = Mode::None;
      return true;
    }
    return close();
  }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(size_t, const std::string&, const json::exception& e) {
    // Parser messages can quote input bytes: keep the error on one line.
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    syntax_error_ = std::move(msg);
    return false;
  }

  const std::string& syntax_error() const { return syntax_error_; }
  const std::string& error_message() const { return error_; }

 private:
  enum class Mode { None, Vocab, Merges, MergePair };
  static constexpr const char* kBadMerge = "a merge must be \"a b\" or [\"a\", \"b\"]";

  std::string vocab_error() const { return "vocab entry \"" + key_ + "\" has no integer id"; }
  bool error(std::string msg) {
    error_ = std::move(msg);
    return false;
  }
  bool vocab_id(int64_t v) {
    if (v < INT32_MIN || v > INT32_MAX) return error(vocab_error());
    out_->vocab_entries.emplace_back(std::move(key_), int32_t(v));
    return true;
  }
  // The next value is the member `name` of the root's "model" object.
  bool at_model_member(const char* name) const {
    return stack_.size() == 2 && stack_[1] == model_ && key_ == name;
  }
  // Stores v where the parser is (root, object member or array element).
  json* place(json&& v) {
    if (stack_.empty()) {
      out_->doc = std::move(v);
      return &out_->doc;
    }
    json& top = *stack_.back();
    if (top.is_object()) return &(top[key_] = std::move(v));
    top.push_back(std::move(v));
    return &top.back();
  }
  bool value(json&& v) {
    if (mode_ == Mode::Vocab) return error(vocab_error());
    if (mode_ != Mode::None) return error(kBadMerge);
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    const bool is_model = stack_.size() == 1 && stack_[0]->is_object() && key_ == "model" && container.is_object();
    json* p = place(std::move(container));
    if (is_model) model_ = p;
    stack_.push_back(p);
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  TokenizerJson* out_;
  std::vector<json*> stack_;  // the open containers; pointers stay valid (a map node, or the last array element)
  json* model_ = nullptr;
  std::string key_;
  Mode mode_ = Mode::None;
  std::pair<std::string, std::string> pair_;
  int pair_n_ = 0;
  std::string syntax_error_, error_;
};

std::string read_file_text(const fs::path& file) {
  const std::string path = file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot read ", path, ": ", std::strerror(errno));
  std::string text;
  in.seekg(0, std::ios::end);
  text.resize(size_t(std::max<std::streamoff>(in.tellg(), 0)));
  in.seekg(0);
  in.read(text.data(), std::streamsize(text.size()));
  RINFER_CHECK(in, "cannot read ", path);
  return text;
}

TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& path) {
  check_json_depth(text, "tokenizer: " + path);
  TokenizerJson tj;
  TokenizerJsonSax sax(&tj);
  if (!json::sax_parse(text, &sax)) {
    if (!sax.error_message().empty()) fail("tokenizer: ", path, ": ", sax.error_message());
    fail(path, " is not valid JSON: ", sax.syntax_error());
  }
  RINFER_CHECK(tj.doc.is_object(), "tokenizer: ", path, " must hold a JSON object");
  return tj;
}

// model.vocab as token → id, from the capture or (not an object) the tree.
TokenMap take_vocab(const json& m, TokenizerJson& tj) {
  if (tj.has_vocab) {
    TokenMap vocab;
    vocab.reserve(tj.vocab_entries.size());
    // A repeated key: the last wins, as in a JSON tree.
    for (auto& [tok, id] : tj.vocab_entries) vocab.insert_or_assign(std::move(tok), id);
    tj.vocab_entries = {};
    return vocab;
  }
  const auto& vocab_j = m.find("vocab");
  RINFER_CHECK(vocab_j != m.end() && vocab_j->is_object(), "tokenizer: model \"vocab\" must be an object");
  return {};
}

std::unique_ptr<BpeModel> make_bpe(const json& m, TokenizerJson& tj) {
  TokenMap vocab = take_vocab(m, tj);
  // Merges are "a b" strings (older files) or ["a", "b"] pairs.
  std::vector<std::pair<std::string, std::string>> merges = std::move(tj.merges);
  if (auto it = m.find("merges"); !tj.has_merges && it != m.end() && !it->is_null()) {
    RINFER_CHECK(it->is_array(), "tokenizer: model \"merges\" must be a list");
    merges.reserve(it->size());
    for (const auto& e : *it) {
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        const size_t sp = s.find(' ', 1);
        RINFER_CHECK(sp != std::string::npos, "tokenizer: merge \"", s, "\" is not two tokens");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        RINFER_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(),
                     "tokenizer: a merge must be \"a b\" or [\"a\", \"b\"]");
        merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      }
    }
  }
  BpeModel::Options o;
  o.byte_fallback = json_bool(m, "byte_fallback", false);
  o.fuse_unk = json_bool(m, "fuse_unk", false);
  o.ignore_merges = json_bool(m, "ignore_merges", false);
  if (auto it = m.find("continuing_subword_prefix"); it != m.end() && it->is_string())
    o.continuing_subword_prefix = it->get<std::string>();
  if (auto it = m.find("end_of_word_suffix"); it != m.end() && it->is_string())
    o.end_of_word_suffix = it->get<std::string>();
  if (auto it = m.find("unk_token"); it != m.end() && it->is_string()) {
    auto v = vocab.find(it->get<std::string>());
    RINFER_CHECK(v != vocab.end(), "tokenizer: unk_token \"", it->get<std::string>(), "\" is not in the vocabulary");
    o.unk_id = v->second;
  }
  RINFER_CHECK(m.value("dropout", json()).is_null() || m["dropout"].get<double>() == 0.0,
               "tokenizer: BPE dropout is not supported (it makes encoding random)");
  return std::make_unique<BpeModel>(std::move(vocab), merges, std::move(o));
}

std::unique_ptr<TokenModel> make_wordpiece(const json& m, TokenizerJson& tj) {
  TokenMap vocab = take_vocab(m, tj);
  const std::string unk = m.contains("unk_token") ? json_string(m, "unk_token") : "[UNK]";
  const std::string prefix =
      m.contains("continuing_subword_prefix") ? json_string(m, "continuing_subword_prefix") : "##";
  const int64_t max_chars = json_int(m, "max_input_chars_per_word", 100);
  RINFER_CHECK(max_chars > 0, "tokenizer: WordPiece max_input_chars_per_word must be positive");
  return std::make_unique<WordPieceModel>(std::move(vocab), unk, prefix, size_t(max_chars));
}

std::unique_ptr<TokenModel> make_unigram(const json& m) {
  const auto& vocab_j = m.find("vocab");
  RINFER_CHECK(vocab_j != m.end() && vocab_j->is_array(), "tokenizer: Unigram \"vocab\" must be a list");
  std::vector<std::pair<std::string, double>> pieces;
  pieces.reserve(vocab_j->size());
  for (const auto& e : *vocab_j) {
    RINFER_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number(),
                 "tokenizer: a Unigram vocab entry must be [\"piece\", score]");
    pieces.emplace_back(e[0].get<std::string>(), e[1].get<double>());
  }
  int32_t unk = -1;
  if (auto it = m.find("unk_id"); it != m.end() && !it->is_null()) {
    RINFER_CHECK(it->is_number_integer() && it->get<int64_t>() >= 0, "tokenizer: Unigram unk_id must be an integer");
    unk = it->get<int32_t>();
  }
  return std::make_unique<UnigramModel>(std::move(pieces), unk, json_bool(m, "byte_fallback", false));
}

AddedToken parse_added(const json& e) {
  RINFER_CHECK(e.is_object() && e.contains("id") && e["id"].is_number_integer() && e.contains("content") &&
                   e["content"].is_string(),
               "tokenizer: an added_tokens entry needs an integer \"id\" and a string \"content\"");
  AddedToken t;
  t.id = e["id"].get<int32_t>();
  t.content = e["content"].get<std::string>();
  t.special = json_bool(e, "special", false);
  t.lstrip = json_bool(e, "lstrip", false);
  t.rstrip = json_bool(e, "rstrip", false);
  t.single_word = json_bool(e, "single_word", false);
  t.normalized = json_bool(e, "normalized", !t.special);
  return t;
}

bool is_llama_class(const std::string& cls) {
  static const char* kClasses[] = {"LlamaTokenizer",     "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                   "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"};
  return std::find(std::begin(kClasses), std::end(kClasses), cls) != std::end(kClasses);
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const fs::path& file, const HfTokenizerConfig& cfg) {
  return load_hf_tokenizer_json_text(read_file_text(file), file.string(), cfg);
}

std::unique_ptr<Tokenizer> load_hf_tokenizer_json_text(std::string_view text, const std::string& name,
                                                      const HfTokenizerConfig& cfg) {
  TokenizerJson tj = parse_tokenizer_json(text, name);
  const json& j = tj.doc;
  TokenizerPipeline p;
  try {
    const auto model_it = j.find("model");
    RINFER_CHECK(model_it != j.end() && model_it->is_object(), "no \"model\" object");
    const std::string type = model_it->value("type", std::string("BPE"));
    if (type == "BPE")
      p.model = make_bpe(*model_it, tj);
    else if (type == "WordPiece")
      p.model = make_wordpiece(*model_it, tj);
    else if (type == "Unigram")
      p.model = make_unigram(*model_it);
    else
      fail("unsupported model type \"", type, "\" (rinfer reads BPE, WordPiece and Unigram tokenizer.json files)");
    p.normalizer = make_normalizer(j.value("normalizer", json()));
    p.pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", json()));
    p.decoder = make_decoder(j.value("decoder", json()));
    p.post = make_post_processor(j.value("post_processor", json()));
    if (auto it = j.find("added_tokens"); it != j.end() && !it->is_null()) {
      RINFER_CHECK(it->is_array(), "\"added_tokens\" must be a list");
      for (const auto& e : *it) p.added.add(parse_added(e));
    }
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.starts_with("tokenizer: ")) msg.erase(0, 11);
    fail("tokenizer: ", name, ": ", msg);
  }

  // transformers adds the config's tokens to the fast tokenizer when they
  // are missing: added_tokens_decoder entries, then the special roles and
  // additional_special_tokens (special, matched in text, skipped on decode).
  auto id_of = [&](const std::string& content) -> int32_t {
    if (const AddedToken* t = p.added.by_content(content)) return t->id;
    return p.model->token_to_id(content);
  };
  for (const auto& [id, spec] : cfg.added_tokens) {
    AddedToken t{spec.content, id, spec.special, spec.lstrip, spec.rstrip, spec.single_word, !spec.special};
    if (!p.added.by_content(spec.content)) p.added.add(t);
  }
  auto add_special = [&](const AddedTokenSpec& spec) -> int32_t {
    const int32_t id = id_of(spec.content);
    if (id < 0) return -1;
    p.added.add({spec.content, id, true, spec.lstrip, spec.rstrip, spec.single_word, false});
    return id;
  };
  const bool llama = is_llama_class(cfg.tokenizer_class);
  auto role = [&](const HfTokenizerConfig::Role& r, const char* llama_default) -> int32_t {
    if (r.present) return r.token ? add_special(*r.token) : -1;
    if (!llama) return -1;
    AddedTokenSpec s;
    s.content = llama_default;
    return add_special(s);
  };
  p.bos = role(cfg.bos, "<s>");
  p.eos = role(cfg.eos, "</s>");
  role(cfg.unk, "<unk>");
  role(cfg.pad, "");
  for (const auto& t : cfg.additional_special_tokens) add_special(t);
  if (cfg.bos.present && cfg.bos.token && p.bos < 0)
    fail("tokenizer: bos_token \"", cfg.bos.token->content, "\" is not in ", name);
  if (cfg.eos.present && cfg.eos.token && p.eos < 0)
    fail("tokenizer: eos_token \"", cfg.eos.token->content, "\" is not in ", name);

  if (llama) {
    // LlamaTokenizerFast.update_post_processor: "<bos> $A <eos>" from the
    // config switches, replacing tokenizer.json's post-processor.
    const bool add_bos = cfg.add_bos_token.value_or(true), add_eos = cfg.add_eos_token.value_or(false);
    RINFER_CHECK(!add_bos || p.bos >= 0, "tokenizer: add_bos_token is true but there is no bos_token");
    RINFER_CHECK(!add_eos || p.eos >= 0, "tokenizer: add_eos_token is true but there is no eos_token");
    p.post = PostProcessor{};
    if (add_bos) p.post.prefix.push_back(p.bos);
    if (add_eos) p.post.suffix.push_back(p.eos);
  }
  if (p.eos >= 0) p.eos_ids.push_back(p.eos);
  for (int32_t id : cfg.eos_token_ids)
    if (std::find(p.eos_ids.begin(), p.eos_ids.end(), id) == p.eos_ids.end()) p.eos_ids.push_back(id);
  p.clean_up_tokenization_spaces = cfg.clean_up_tokenization_spaces;
  p.split_special_tokens = cfg.split_special_tokens;
  return make_pipeline_tokenizer(std::move(p));
}

}  // namespace rinfer

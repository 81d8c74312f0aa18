#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/json_util.h"
#include "tokenizer/pipeline_tokenizer.h"

namespace rinfer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_tokenizer_json(const fs::path& file) {
  json j = read_json_file(file.string());
  RINFER_CHECK(j.is_object(), "tokenizer: ", file.string(), " must hold a JSON object");
  return j;
}

std::unique_ptr<BpeModel> make_bpe(const json& m) {
  const auto& vocab_j = m.find("vocab");
  RINFER_CHECK(vocab_j != m.end() && vocab_j->is_object(), "tokenizer: model \"vocab\" must be an object");
  TokenMap vocab;
  vocab.reserve(vocab_j->size());
  for (const auto& [tok, id] : vocab_j->items()) {
    RINFER_CHECK(id.is_number_integer(), "tokenizer: vocab entry \"", tok, "\" has no integer id");
    vocab.emplace(tok, id.get<int32_t>());
  }
  // Merges are "a b" strings (older files) or ["a", "b"] pairs.
  std::vector<std::pair<std::string, std::string>> merges;
  if (auto it = m.find("merges"); it != m.end() && !it->is_null()) {
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
  const json j = read_tokenizer_json(file);
  TokenizerPipeline p;
  try {
    const auto model_it = j.find("model");
    RINFER_CHECK(model_it != j.end() && model_it->is_object(), "no \"model\" object");
    const std::string type = model_it->value("type", std::string("BPE"));
    RINFER_CHECK(type == "BPE", "unsupported model type \"", type, "\" (rinfer reads BPE tokenizer.json files)");
    p.model = make_bpe(*model_it);
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
    fail("tokenizer: ", file.string(), ": ", msg);
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
    fail("tokenizer: bos_token \"", cfg.bos.token->content, "\" is not in ", file.string());
  if (cfg.eos.present && cfg.eos.token && p.eos < 0)
    fail("tokenizer: eos_token \"", cfg.eos.token->content, "\" is not in ", file.string());

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

#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace rinfer {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  RINFER_CHECK(in, "tokenizer: cannot read ", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --- Protobuf wire format, just enough to flip one flag of the model. ---

bool read_varint(std::string_view s, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < s.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(s[(*pos)++]);
    *v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

void write_varint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The serialized model with normalizer_spec.add_dummy_prefix = false, which
// is how transformers loads tokenizer.model when legacy is false. Appending
// the field to ModelProto.normalizer_spec (field 3) is enough: protobuf keeps
// the last value of a repeated scalar field.
std::string without_dummy_prefix(std::string_view model, const fs::path& path) {
  auto bad = [&] { fail("tokenizer: cannot load ", path.string(), ": not a valid SentencePiece model"); };
  const char kAddDummyPrefixFalse[2] = {0x18, 0x00};  // field 3, varint 0
  std::string out;
  size_t pos = 0;
  bool patched = false;
  while (pos < model.size()) {
    const size_t start = pos;
    uint64_t key = 0, v = 0;
    if (!read_varint(model, &pos, &key)) bad();
    switch (key & 7) {
      case 0:
        if (!read_varint(model, &pos, &v)) bad();
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2: {
        if (!read_varint(model, &pos, &v) || v > model.size() - pos) bad();
        if ((key >> 3) == 3) {
          std::string body(model.substr(pos, v));
          body.append(kAddDummyPrefixFalse, 2);
          write_varint(key, &out);
          write_varint(body.size(), &out);
          out += body;
          patched = true;
          pos += v;
          continue;
        }
        pos += v;
        break;
      }
      default:
        bad();
    }
    if (pos > model.size()) bad();
    out.append(model.substr(start, pos - start));
  }
  if (!patched) {
    write_varint((3 << 3) | 2, &out);
    write_varint(2, &out);
    out.append(kAddDummyPrefixFalse, 2);
  }
  return out;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(from, i);
    if (j == std::string_view::npos) break;
    out.append(s.substr(i, j - i));
    out.append(to);
    i = j + from.size();
  }
  out.append(s.substr(i));
  return out;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const fs::path& model_file, const HfTokenizerConfig& cfg);

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    return encode_impl(text, add_special, split_special_);
  }
  std::vector<int32_t> encode_no_parse_special(std::string_view text, bool add_special) const override {
    return encode_impl(text, add_special, true);
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string id_to_piece(int32_t id) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  bool is_special(int32_t id) const override {
    return id >= 0 && id < vocab_size_ && (flags_[size_t(id)] & kSpecial);
  }
  const std::vector<int32_t>& eos_ids() const override { return eos_ids_; }

 private:
  // flags_ bits per id.
  static constexpr uint8_t kRendered = 1;  // decodes as its own text (added or special token)
  static constexpr uint8_t kSpecial = 2;   // in transformers' all_special_ids: skipped by skip_special

  // A string cut out of the text before SentencePiece sees it.
  struct Added {
    std::string content;
    int32_t id;
    bool lstrip, rstrip, single_word;
  };
  // A piece of the input: text for SentencePiece, or a matched added token.
  struct Chunk {
    std::string text;
    const Added* token = nullptr;
  };

  int32_t resolve(const std::string& content) const;
  void add_token(int32_t id, const AddedTokenSpec& spec, bool special);
  int32_t setup_role(const HfTokenizerConfig::Role& role, int sp_role_id, const char* name, bool required);
  void check_id(int32_t id) const;
  std::vector<Chunk> split_added(std::string_view text) const;
  static void apply_strip_rules(std::vector<Chunk>& chunks);
  void encode_text(const std::string& text, std::vector<int32_t>* ids) const;
  std::vector<int32_t> encode_impl(std::string_view text, bool add_special, bool split_special) const;
  void decode_pieces(std::vector<int>& pieces, bool at_start, std::string* out) const;

  fs::path path_;
  sentencepiece::SentencePieceProcessor sp_;
  // legacy=false encodes with the dummy prefix switched off (see encode_text).
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_no_prefix_;
  int32_t sp_size_ = 0;
  int32_t vocab_size_ = 0;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = true, add_eos_ = false;
  bool legacy_ = true, add_prefix_space_ = true, split_special_ = false;
  std::vector<int32_t> eos_ids_;
  std::vector<uint8_t> flags_;
  std::unordered_map<int32_t, std::string> rendered_;
  std::vector<Added> added_;
  std::unordered_map<std::string, size_t> added_by_content_;
  std::array<std::vector<size_t>, 256> added_by_first_byte_;  // indices into added_, longest first
  // A piece that decodes to fixed text with no leading space: decoding
  // [anchor, ids...] and dropping that text gives ids' text as it reads in
  // the middle of a sequence, where SentencePiece keeps the leading space.
  int anchor_ = -1;
  std::string anchor_text_;
  std::string unk_content_;
  size_t unk_token_length_ = 0;
  int32_t space_piece_ = -1;
};

SentencePieceTokenizer::SentencePieceTokenizer(const fs::path& model_file, const HfTokenizerConfig& cfg)
    : path_(model_file) {
  const std::string model = read_file(model_file);
  const auto st = model.empty() ? sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, "empty")
                                : sp_.LoadFromSerializedProto(model);
  RINFER_CHECK(st.ok(), "tokenizer: cannot load ", model_file.string(), ": not a valid SentencePiece model");
  sp_size_ = sp_.GetPieceSize();
  RINFER_CHECK(sp_size_ > 0, "tokenizer: ", model_file.string(), " has no pieces");

  vocab_size_ = sp_size_;
  for (const auto& [id, spec] : cfg.added_tokens) {
    // Real vocabularies stay far below this; a typo must not allocate gigabytes.
    RINFER_CHECK(id < (1 << 24), "tokenizer: added token \"", spec.content, "\" has implausible id ", id);
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
  flags_.assign(size_t(vocab_size_), 0);
  // added_tokens_decoder first: it decides the id of its strings.
  for (const auto& [id, spec] : cfg.added_tokens) add_token(id, spec, spec.special);

  bos_ = setup_role(cfg.bos, sp_.bos_id(), "bos_token", true);
  eos_ = setup_role(cfg.eos, sp_.eos_id(), "eos_token", true);
  unk_ = setup_role(cfg.unk, sp_.unk_id(), "unk_token", true);
  setup_role(cfg.pad, -1, "pad_token", false);  // LlamaTokenizer has no default pad
  for (const auto& t : cfg.additional_special_tokens) {
    const int32_t id = resolve(t.content);
    RINFER_CHECK(id >= 0, "tokenizer: additional special token \"", t.content, "\" is neither in ",
                 model_file.string(), " nor in added_tokens_decoder");
    add_token(id, t, true);
  }

  add_bos_ = cfg.add_bos_token.value_or(true);
  add_eos_ = cfg.add_eos_token.value_or(false);
  legacy_ = cfg.legacy;
  add_prefix_space_ = cfg.add_prefix_space;
  split_special_ = cfg.split_special_tokens;

  if (eos_ >= 0) eos_ids_.push_back(eos_);
  for (int32_t id : cfg.eos_token_ids)
    if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);

  for (auto& v : added_by_first_byte_) {
    std::stable_sort(v.begin(), v.end(),
                     [&](size_t a, size_t b) { return added_[a].content.size() > added_[b].content.size(); });
  }

  // Prefer an ordinary piece; an ASCII byte piece works too (it forms a whole
  // character on its own, so it never merges with the bytes after it).
  for (int id = 0; id < sp_size_ && anchor_ < 0; ++id) {
    if (sp_.IsControl(id) || sp_.IsUnknown(id) || sp_.IsUnused(id) || sp_.IsByte(id)) continue;
    const std::string& p = sp_.IdToPiece(id);
    if (p.empty() || p.starts_with(kSpaceSymbol) || utf8::is_python_space(static_cast<unsigned char>(p[0])))
      continue;
    anchor_ = id;
  }
  if (anchor_ < 0) {
    const int id = sp_.PieceToId("<0x41>");
    if (id >= 0 && sp_.IsByte(id)) anchor_ = id;
  }
  RINFER_CHECK(anchor_ >= 0, "tokenizer: ", model_file.string(), " has no plain piece (only control/byte pieces)");
  const auto dst = sp_.Decode(std::vector<int>{anchor_}, &anchor_text_);
  RINFER_CHECK(dst.ok() && !anchor_text_.empty(), "tokenizer: cannot decode with ", model_file.string());

  if (!legacy_) {
    sp_no_prefix_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto st2 = sp_no_prefix_->LoadFromSerializedProto(without_dummy_prefix(model, model_file));
    RINFER_CHECK(st2.ok(), "tokenizer: cannot load ", model_file.string(), ": not a valid SentencePiece model");
    unk_content_ = unk_ >= 0 ? rendered_.at(unk_) : std::string();
    std::vector<int> v;
    if (!unk_content_.empty() && sp_no_prefix_->Encode(unk_content_, &v).ok()) unk_token_length_ = v.size();
    space_piece_ = sp_.PieceToId(kSpaceSymbol);
    if (space_piece_ == sp_.unk_id() && sp_.IdToPiece(space_piece_) != kSpaceSymbol) space_piece_ = -1;
  }
}

// transformers' convert_tokens_to_ids: added tokens first, then the model's
// pieces; -1 when neither has the string.
int32_t SentencePieceTokenizer::resolve(const std::string& content) const {
  if (auto it = added_by_content_.find(content); it != added_by_content_.end()) return added_[it->second].id;
  const int id = sp_.PieceToId(content);
  if (id < 0 || (id == sp_.unk_id() && sp_.IdToPiece(id) != content)) return -1;
  return id;
}

void SentencePieceTokenizer::add_token(int32_t id, const AddedTokenSpec& spec, bool special) {
  if (special) flags_[size_t(id)] |= kSpecial;
  if (!(flags_[size_t(id)] & kRendered)) {
    flags_[size_t(id)] |= kRendered;
    rendered_[id] = spec.content;
  }
  if (spec.content.empty() || added_by_content_.count(spec.content)) return;
  added_by_content_[spec.content] = added_.size();
  added_by_first_byte_[static_cast<unsigned char>(spec.content[0])].push_back(added_.size());
  added_.push_back({spec.content, id, spec.lstrip, spec.rstrip, spec.single_word});
}

int32_t SentencePieceTokenizer::setup_role(const HfTokenizerConfig::Role& role, int sp_role_id, const char* name,
                                           bool required) {
  AddedTokenSpec spec;
  if (!role.present) {
    // No key: the model's own piece for the role (<s>, </s>, <unk> for
    // LLaMA, the same strings LlamaTokenizer defaults to).
    if (sp_role_id < 0) return -1;
    spec.content = sp_.IdToPiece(sp_role_id);
  } else if (!role.token) {
    return -1;  // explicitly null
  } else {
    spec = *role.token;
  }
  const int32_t id = resolve(spec.content);
  if (id < 0) {
    RINFER_CHECK(!required, "tokenizer: ", name, " \"", spec.content, "\" is neither in ", path_.string(),
                 " nor in added_tokens_decoder");
    return -1;
  }
  add_token(id, spec, true);
  return id;
}

void SentencePieceTokenizer::check_id(int32_t id) const {
  RINFER_CHECK(id >= 0 && id < vocab_size_, "token id ", id, " is out of range (vocab size ", vocab_size_, ")");
  RINFER_CHECK(id < sp_size_ || (flags_[size_t(id)] & kRendered), "token id ", id,
               " has no piece in the tokenizer (vocab size ", vocab_size_, ")");
}

// transformers' Trie.split: at the earliest position where an added token
// starts, cut out the longest one starting there.
std::vector<SentencePieceTokenizer::Chunk> SentencePieceTokenizer::split_added(std::string_view text) const {
  std::vector<Chunk> out;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const Added* hit = nullptr;
    for (size_t idx : added_by_first_byte_[static_cast<unsigned char>(text[i])]) {
      if (text.substr(i).starts_with(added_[idx].content)) {
        hit = &added_[idx];
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({std::string(text.substr(start, i - start)), nullptr});
    out.push_back({hit->content, hit});
    i += hit->content.size();
    start = i;
  }
  if (start < text.size()) out.push_back({std::string(text.substr(start)), nullptr});
  return out;
}

// The AddedToken switches, applied left to right as PreTrainedTokenizer.tokenize
// does: rstrip eats whitespace after the token, lstrip before it, and a
// single_word token glued to a neighbouring word is not a token.
void SentencePieceTokenizer::apply_strip_rules(std::vector<Chunk>& chunks) {
  auto set_text = [](Chunk& c, std::string text) {
    if (text != c.text) c.token = nullptr;  // no longer the token's exact string
    c.text = std::move(text);
  };
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!chunks[i].token) continue;
    const Added& a = *chunks[i].token;
    Chunk* left = i > 0 ? &chunks[i - 1] : nullptr;
    Chunk* right = i + 1 < chunks.size() ? &chunks[i + 1] : nullptr;
    if (a.rstrip && right && !right->text.empty()) set_text(*right, std::string(utf8::lstrip(right->text)));
    if (a.lstrip && left && !left->text.empty()) set_text(*left, std::string(utf8::rstrip(left->text)));
    if (a.single_word && left && !left->text.empty() && left->text.back() != ' ') {
      set_text(*left, left->text + chunks[i].text);
      set_text(chunks[i], "");
    } else if (a.single_word && right && !right->text.empty() && right->text.front() != ' ') {
      set_text(chunks[i], chunks[i].text + right->text);
      set_text(*right, "");
    }
  }
}

void SentencePieceTokenizer::encode_text(const std::string& text, std::vector<int32_t>* ids) const {
  std::vector<int> v;
  sentencepiece::util::Status st;
  if (legacy_) {
    st = sp_.Encode(text, &v);
  } else if (text.starts_with(kSpaceSymbol) || text.starts_with(' ')) {
    // As LlamaTokenizer._tokenize (legacy=false): encode behind the unk
    // token's text so the leading space survives, then drop those pieces.
    st = sp_no_prefix_->Encode(unk_content_ + text, &v);
    if (v.size() >= unk_token_length_) v.erase(v.begin(), v.begin() + std::ptrdiff_t(unk_token_length_));
  } else {
    st = sp_no_prefix_->Encode(text, &v);
  }
  RINFER_CHECK(st.ok(), "tokenizer: SentencePiece cannot encode the text: ", st.ToString());
  ids->insert(ids->end(), v.begin(), v.end());
}

std::vector<int32_t> SentencePieceTokenizer::encode_impl(std::string_view text, bool add_special,
                                                         bool split_special) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos)
    fail("prompt is not valid UTF-8 (byte offset ", bad, ")");
  std::string prepared;
  if (!legacy_ && !text.empty()) {
    // LlamaTokenizer.tokenize (legacy=false): literal U+2581 is a space, and
    // the prefix space is written into the text instead of by SentencePiece.
    prepared = replace_all(text, kSpaceSymbol, " ");
    if (add_prefix_space_) prepared.insert(0, kSpaceSymbol);
    text = prepared;
  }
  std::vector<Chunk> chunks;
  if (split_special) {
    chunks.push_back({std::string(text), nullptr});
  } else {
    chunks = split_added(text);
    apply_strip_rules(chunks);
  }

  std::vector<int32_t> ids;
  if (add_special && add_bos_ && bos_ >= 0) ids.push_back(bos_);
  const size_t body = ids.size();
  bool second_is_token = false;
  for (const Chunk& c : chunks) {
    if (c.text.empty()) continue;
    if (c.token) {
      if (ids.size() == body + 1) second_is_token = true;
      ids.push_back(c.token->id);
    } else {
      encode_text(c.text, &ids);
    }
  }
  // legacy=false: a lone prefix "▁" in front of a special token is dropped.
  if (!legacy_ && second_is_token && ids.size() > body + 1 && ids[body] == space_piece_ &&
      is_special(ids[body + 1]))
    ids.erase(ids.begin() + std::ptrdiff_t(body));
  if (add_special && add_eos_ && eos_ >= 0) ids.push_back(eos_);
  return ids;
}

void SentencePieceTokenizer::decode_pieces(std::vector<int>& pieces, bool at_start, std::string* out) const {
  if (pieces.empty()) return;
  std::string s;
  if (at_start) {
    const auto st = sp_.Decode(pieces, &s);
    RINFER_ASSERT(st.ok());
  } else {
    pieces.insert(pieces.begin(), anchor_);
    const auto st = sp_.Decode(pieces, &s);
    RINFER_ASSERT(st.ok() && s.starts_with(anchor_text_));
    s.erase(0, anchor_text_.size());
  }
  out->append(s);
  pieces.clear();
}

// Skipped special tokens are removed before SentencePiece decodes the rest,
// as transformers does, so byte-fallback characters and the leading space of
// the first piece come out the same. A token decoded as its own text (an
// added token, or a special one kept with skip_special=false) is written in
// place, and the pieces after it keep their leading space (transformers'
// LlamaTokenizerFast and llama.cpp both do this; the slow tokenizer's legacy
// extra space before special tokens is not reproduced, it would make the text
// of a prefix change once more ids arrive, which streaming cannot allow).
std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  std::vector<int> pieces;
  pieces.reserve(ids.size() + 1);
  for (int32_t id : ids) {
    check_id(id);
    const uint8_t f = flags_[size_t(id)];
    if ((f & kSpecial) && skip_special) continue;
    if (f & kRendered) {
      decode_pieces(pieces, out.empty(), &out);
      out += rendered_.at(id);
      continue;
    }
    pieces.push_back(id);
  }
  decode_pieces(pieces, out.empty(), &out);
  return out;
}

std::string SentencePieceTokenizer::id_to_piece(int32_t id) const {
  check_id(id);
  if (flags_[size_t(id)] & kRendered) return rendered_.at(id);
  return sp_.IdToPiece(id);
}

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const fs::path& model_file, const HfTokenizerConfig& cfg) {
  return std::make_unique<SentencePieceTokenizer>(model_file, cfg);
}

SentencePieceVocab read_sentencepiece_vocab(const fs::path& model_file) {
  const std::string model = read_file(model_file);
  sentencepiece::SentencePieceProcessor sp;
  const auto st = model.empty() ? sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, "empty")
                                : sp.LoadFromSerializedProto(model);
  RINFER_CHECK(st.ok(), "tokenizer: cannot load ", model_file.string(), ": not a valid SentencePiece model");
  SentencePieceVocab v;
  const int n = sp.GetPieceSize();
  RINFER_CHECK(n > 0, "tokenizer: ", model_file.string(), " has no pieces");
  for (int id = 0; id < n; ++id) {
    v.pieces.push_back(sp.IdToPiece(id));
    v.scores.push_back(sp.GetScore(id));
    const int32_t type = sp.IsUnknown(id) ? 2 : sp.IsControl(id) ? 3 : sp.IsUnused(id) ? 5 : sp.IsByte(id) ? 6 : 1;
    v.types.push_back(type);
    v.byte_fallback = v.byte_fallback || type == 6;
  }
  v.unk_id = sp.unk_id();
  v.bos_id = sp.bos_id();
  v.eos_id = sp.eos_id();
  return v;
}

}  // namespace rinfer

#pragma once
// tokenizer.json decoders: ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, WordPiece, Sequence. As in the tokenizers library each decoder
// maps the list of token strings to a new list (decode_chain), and the
// final list is concatenated.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rinfer {

class PieceDecoder {
 public:
  virtual ~PieceDecoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// null → nullptr (tokens are then joined with spaces, as the library does).
std::unique_ptr<PieceDecoder> make_decoder(const nlohmann::json& j);
std::unique_ptr<PieceDecoder> make_byte_level_decoder();
// "##ing" joins the previous piece, other pieces start after a space; with
// cleanup, " ." → "." and the other rules of the tokenizers library.
std::unique_ptr<PieceDecoder> make_wordpiece_decoder(const std::string& prefix, bool cleanup);
// Replace "▁" → " ", ByteFallback, Fuse, Strip one leading space: LLaMA-2's.
std::unique_ptr<PieceDecoder> make_sentencepiece_decoder(bool strip_prefix);

// Bytes → text, each maximal invalid subsequence replaced by U+FFFD as
// Rust's String::from_utf8_lossy does.
std::string utf8_lossy(std::string_view bytes);

}  // namespace rinfer

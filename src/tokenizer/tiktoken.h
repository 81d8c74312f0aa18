#pragma once
// tiktoken vocabularies: a text file of "base64(token bytes) rank" lines,
// as Qwen-1 (qwen.tiktoken, QWenTokenizer) and GLM-4 (tokenizer.model,
// ChatGLM4Tokenizer) ship them. Encoding is tiktoken's: special tokens are
// cut out first, the rest is split by the family's regex, and each piece is
// one token when it is in the vocabulary, else its bytes are merged pairwise,
// always the adjacent pair whose concatenation has the lowest rank
// (tiktoken's byte_pair_merge). Token ids are the ranks; the family's
// special tokens follow, from the number of ranks on. Decoding joins the
// bytes and writes U+FFFD for what is not UTF-8 (errors="replace").
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/hf_config.h"
#include "tokenizer/tokenizer.h"

namespace rinfer {

// Whether the file's first line looks like tiktoken ("base64 rank"). A
// SentencePiece model (a protobuf) never does.
bool is_tiktoken_file(const std::filesystem::path& file);

// (token bytes, rank) per non-empty line, in file order. Throws
// rinfer::Error naming the file and line for malformed base64, a rank that
// is not a non-negative integer, or a repeated token or rank.
std::vector<std::pair<std::string, int32_t>> parse_tiktoken(std::string_view text, const std::string& name);

enum class TiktokenFamily {
  Qwen,  // QWenTokenizer: NFC, \p{N} single digits, <|endoftext|> <|im_start|> <|im_end|> <|extra_0..204|>
  Glm4,  // ChatGLM4Tokenizer: \p{N}{1,3}, [gMASK]<sop> prefix, 14 special tokens
};

// family: from cfg.tokenizer_class (QWenTokenizer / ChatGLM4Tokenizer), or
// when there is none from the file name (tokenizer.model → GLM-4, anything
// else → Qwen).
std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::filesystem::path& file, const HfTokenizerConfig& cfg);
std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::filesystem::path& file, const HfTokenizerConfig& cfg,
                                                   TiktokenFamily family);

}  // namespace rinfer

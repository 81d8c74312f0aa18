#pragma once
// Shared by the fuzz targets (fuzz/<name>_fuzzer.cpp). A target calls the
// parsing entry points rinfer itself uses; the exceptions that are the
// parsers' documented way of saying no (rinfer::Error, and nlohmann's
// json::exception where a caller turns it into an Error) are expected
// rejections. Anything else — a sanitizer report, another exception type, a
// timeout, more than 2 GB — is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace rinfer::fuzz {

template <typename F>
void expect_rejections(F&& f) {
  try {
    f();
  } catch (const Error&) {
  } catch (const nlohmann::json::exception&) {
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs a loaded tokenizer over `text` the way the CLI and the server do:
// encode (special tokens parsed and not), decode, piece lookup and the
// streaming detokenizer. Rejections (invalid UTF-8, ...) are expected.
inline void exercise_tokenizer(const Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids;
  expect_rejections([&] { ids = tok.encode(text, /*add_special=*/true); });
  expect_rejections([&] { tok.encode_no_parse_special(text, /*add_special=*/false); });
  const int32_t n = tok.vocab_size();
  // A few ids of the vocabulary, its ends and one past them.
  for (int32_t id : {0, 1, 2, n / 2, n - 1, n, -1}) ids.push_back(id);
  for (bool skip : {true, false}) {
    expect_rejections([&] { tok.decode(ids, skip); });
  }
  for (int32_t id : ids) {
    expect_rejections([&] { tok.id_to_piece(id); });
    if (id >= 0 && id < n) tok.is_special(id);
  }
  expect_rejections([&] {
    StreamingDetokenizer detok(tok);
    for (int32_t id : ids)
      if (id >= 0 && id < n) detok.push(id);
    detok.flush();
  });
  tok.unstable_suffix(text);
  tok.bos_id();
  tok.eos_id();
  tok.eos_ids();
}

}  // namespace rinfer::fuzz

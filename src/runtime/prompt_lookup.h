#pragma once
// Prompt lookup: draft tokens for speculative decoding without a second
// model. Text that is being summarized, edited or quoted repeats spans of
// its context; when the sequence's last n tokens occurred before, the
// tokens that followed that occurrence are a likely continuation.
#include <cstdint>
#include <span>
#include <vector>

namespace rinfer {

// Up to `max_tokens` tokens that followed the latest earlier occurrence of
// the last n tokens of `history`, for the longest n in [min_n, max_n] that
// has one; empty when none does.
std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> history, int64_t max_tokens, int64_t max_n,
                                         int64_t min_n = 1);

}  // namespace rinfer

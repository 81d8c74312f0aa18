#include "runtime/prompt_lookup.h"

#include <algorithm>

namespace rinfer {

std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> history, int64_t max_tokens, int64_t max_n,
                                         int64_t min_n) {
  const int64_t len = int64_t(history.size());
  if (max_tokens <= 0) return {};
  for (int64_t n = std::min(max_n, len - 1); n >= std::max<int64_t>(min_n, 1); --n) {
    const auto suffix = history.subspan(size_t(len - n));
    // Latest first: recent text is the likelier continuation. The match must
    // end before the suffix itself does, so something follows it.
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + j)) continue;
      const int64_t from = j + n, to = std::min(len, from + max_tokens);
      return std::vector<int32_t>(history.begin() + from, history.begin() + to);
    }
  }
  return {};
}

}  // namespace rinfer

#include "tokenizer/unicode/unicode.h"

#include <algorithm>
#include <vector>

#include "tokenizer/utf8.h"

namespace rinfer::unicode {

namespace {

struct CccEntry {
  uint32_t cp;
  uint8_t ccc;
};
struct DecompEntry {
  uint32_t cp;
  uint32_t offset;
  uint8_t len;
  uint8_t compat;  // 1: only in NFKD (differs from the canonical decomposition)
};
struct ComposeEntry {
  uint32_t first, second, composite;
};
struct LowerEntry {
  uint32_t cp, offset, len;
};
struct RangeEntry {
  uint32_t first, last;
};
struct CategoryEntry {
  uint32_t first, last;
  uint8_t category;  // a Category
};

#include "tokenizer/unicode/unicode_tables.inc"

// Hangul syllables compose and decompose algorithmically (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::lower_bound(std::begin(kCombiningClass), std::end(kCombiningClass), cp,
                             [](const CccEntry& e, uint32_t c) { return e.cp < c; });
  return it != std::end(kCombiningClass) && it->cp == cp ? it->ccc : 0;
}

// Appends the full decomposition of cp.
void decompose(uint32_t cp, bool compat, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xA0) {
    auto it = std::lower_bound(std::begin(kDecomp), std::end(kDecomp), cp,
                               [](const DecompEntry& e, uint32_t c) { return e.cp < c; });
    // Entries for one code point: the canonical one first, then the compat one.
    const DecompEntry* best = nullptr;
    for (; it != std::end(kDecomp) && it->cp == cp; ++it) {
      if (!it->compat || compat) best = &*it;
    }
    if (best) {
      out->insert(out->end(), kDecompPool + best->offset, kDecompPool + best->offset + best->len);
      return;
    }
  }
  out->push_back(cp);
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = std::lower_bound(std::begin(kCompose), std::end(kCompose), std::pair(a, b),
                             [](const ComposeEntry& e, std::pair<uint32_t, uint32_t> k) {
                               return e.first != k.first ? e.first < k.first : e.second < k.second;
                             });
  if (it != std::end(kCompose) && it->first == a && it->second == b) return it->composite;
  return 0;
}

}  // namespace

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::string normalize(std::string_view s, NormalForm form) {
  // ASCII is invariant under every normal form.
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(s);
  const bool compat = form == NormalForm::NFKC || form == NormalForm::NFKD;
  const bool compose = form == NormalForm::NFC || form == NormalForm::NFKC;
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    decompose(utf8::decode_at(s, i, &len), compat, &cps);
    i += len;
  }
  // Canonical ordering: stable sort of each run of non-starters by class.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(cps.begin() + std::ptrdiff_t(i), cps.begin() + std::ptrdiff_t(j),
                       [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  if (compose && !cps.empty()) {
    // Canonical composition: a character combines with the last starter
    // unless a character in between blocks it (a starter, or a non-starter
    // of the same or a higher class).
    std::vector<uint32_t> out;
    out.reserve(cps.size());
    size_t starter = SIZE_MAX;
    int last_ccc = -1;  // class of the last character kept after the starter; -1: none yet
    for (uint32_t cp : cps) {
      const int ccc = combining_class(cp);
      if (starter != SIZE_MAX && (last_ccc == -1 || (last_ccc != 0 && last_ccc < ccc))) {
        if (const uint32_t c = compose_pair(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
      if (ccc == 0) {
        starter = out.size();
        last_ccc = -1;
      } else {
        last_ccc = ccc;
      }
      out.push_back(cp);
    }
    cps = std::move(out);
  }
  std::string r;
  r.reserve(s.size() + 8);
  for (uint32_t cp : cps) append_utf8(cp, &r);
  return r;
}

std::string to_lower(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      r.push_back(b >= 'A' && b <= 'Z' ? char(b + 32) : char(b));
      ++i;
      continue;
    }
    size_t len = 0;
    const uint32_t cp = utf8::decode_at(s, i, &len);
    auto it = std::lower_bound(std::begin(kLower), std::end(kLower), cp,
                               [](const LowerEntry& e, uint32_t c) { return e.cp < c; });
    if (it != std::end(kLower) && it->cp == cp) {
      for (uint32_t k = 0; k < it->len; ++k) append_utf8(kLowerPool[it->offset + k], &r);
    } else {
      r.append(s.substr(i, len));
    }
    i += len;
  }
  return r;
}

bool is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

bool is_alphanumeric(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
  auto it = std::upper_bound(std::begin(kAlnumRanges), std::end(kAlnumRanges), cp,
                             [](uint32_t c, const RangeEntry& e) { return c < e.first; });
  return it != std::begin(kAlnumRanges) && cp <= std::prev(it)->last;
}

Category category(uint32_t cp) {
  auto it = std::upper_bound(std::begin(kCategoryRanges), std::end(kCategoryRanges), cp,
                             [](uint32_t c, const CategoryEntry& e) { return c < e.first; });
  if (it == std::begin(kCategoryRanges) || cp > std::prev(it)->last) return Category::Unassigned;
  return Category(std::prev(it)->category);
}

uint32_t nfd_first(uint32_t cp) {
  if (cp < 0xC0) return cp;
  std::vector<uint32_t> d;
  decompose(cp, false, &d);
  return d[0];
}

uint32_t lower_first(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  auto it = std::lower_bound(std::begin(kLower), std::end(kLower), cp,
                             [](const LowerEntry& e, uint32_t c) { return e.cp < c; });
  return it != std::end(kLower) && it->cp == cp ? kLowerPool[it->offset] : cp;
}

}  // namespace rinfer::unicode

// Prompt-lookup drafting: the longest recent n-gram match wins, the latest
// occurrence of it, and the draft never runs past the history.
#include <gtest/gtest.h>

#include "runtime/prompt_lookup.h"

namespace rinfer {
namespace {

using Ids = std::vector<int32_t>;

TEST(PromptLookup, TakesWhatFollowedTheLatestOccurrenceOfTheLongestSuffix) {
  // "1 2 3" occurred at 0 (then 4 5 6) and "2 3" also at 7 (then 9): the
  // 3-gram wins over the more recent 2-gram.
  const Ids h = {1, 2, 3, 4, 5, 6, 0, 2, 3, 9, 7, 1, 2, 3};
  EXPECT_EQ(prompt_lookup_draft(h, 3, 3), (Ids{4, 5, 6}));
  EXPECT_EQ(prompt_lookup_draft(h, 2, 3), (Ids{4, 5}));
  // Looking for 2-grams at most: "2 3" at 7 is the latest.
  EXPECT_EQ(prompt_lookup_draft(h, 3, 2), (Ids{9, 7, 1}));
  // Of two occurrences of the same n-gram, the later one.
  EXPECT_EQ(prompt_lookup_draft(Ids{5, 8, 5, 9, 5}, 1, 1), (Ids{9}));
}

TEST(PromptLookup, DraftStopsAtTheEndOfTheHistory) {
  // The match is one token before the end: one token follows it.
  EXPECT_EQ(prompt_lookup_draft(Ids{7, 7, 7}, 5, 2), (Ids{7}));
  EXPECT_EQ(prompt_lookup_draft(Ids{1, 2, 1}, 5, 3), (Ids{2, 1}));
}

TEST(PromptLookup, NothingWithoutAMatchOrABudget) {
  EXPECT_TRUE(prompt_lookup_draft(Ids{1, 2, 3, 4}, 3, 3).empty());
  EXPECT_TRUE(prompt_lookup_draft(Ids{}, 3, 3).empty());
  EXPECT_TRUE(prompt_lookup_draft(Ids{4}, 3, 3).empty());
  EXPECT_TRUE(prompt_lookup_draft(Ids{1, 2, 1, 2}, 0, 3).empty());
  // min_n above every match.
  EXPECT_TRUE(prompt_lookup_draft(Ids{1, 2, 9, 2}, 3, 3, 2).empty());
  EXPECT_EQ(prompt_lookup_draft(Ids{1, 2, 9, 2}, 3, 3, 1), (Ids{9, 2}));
}

}  // namespace
}  // namespace rinfer

#pragma once
// StopMatcher: OpenAI `stop` strings over streamed text. Text is released
// as soon as it cannot be the start of a stop string; when one appears, the
// text before it is released, the rest (the stop string included) dropped.
#include <string>
#include <string_view>
#include <vector>

namespace rinfer::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Adds generated text; returns what may be shown now. After a match,
  // stopped() is true and further text is ignored.
  std::string push(std::string_view text);
  // The end of the generation: releases the text held back.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text that could still begin a stop string
  bool stopped_ = false;
};

}  // namespace rinfer::server

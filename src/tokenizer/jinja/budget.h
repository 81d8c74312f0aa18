#pragma once
// The resource budget of the chat-template interpreter. A model's chat
// template is untrusted input: without limits a recursive macro, a deeply
// nested expression, a self-containing list, 'a' * 10**10 or nested
// range() loops would crash rinfer or eat all memory and time. Every limit
// is checked in one place (see each field); going past one is a one-line
// rinfer::Error naming it ("chat template: line 3: recursion deeper than
// 512"), as any other template error. The defaults are far above what
// real chat templates need (tens of levels, ~100 steps per message).
#include <cstddef>
#include <cstdint>
#include <string>

namespace rinfer::jinja {

struct Budget {
  // Nesting of the parsed template: blocks inside blocks plus the
  // expression tree inside them, at any point (parser.cpp: Depth, at the
  // recursive-descent entries and wherever a node wraps another). Also the
  // nesting of a value that is printed, compared or serialized (value.cpp).
  int max_nesting = 256;
  // Evaluation depth: statements, expressions, filter and macro calls on
  // the current evaluation path (Interpreter::Nest at exec / eval /
  // apply_filter entry). Ends recursive macros before the stack does: a
  // level takes up to ~10 KB of stack in an -O0 ASan build (apply_filter),
  // so 512 fits an 8 MB thread stack in every build; real templates use
  // well under 100.
  int max_depth = 512;
  // Evaluation steps: every statement, expression, loop iteration (4), item
  // a builtin copies and node a comparison or printing visits (Meter::step).
  // About a second of work at the default.
  int64_t max_steps = 10'000'000;
  // Bytes of the rendered output (and of a {% set %} block or macro body).
  size_t max_output = size_t(64) << 20;
  // Bytes of any one string value, checked where strings grow.
  size_t max_string = size_t(64) << 20;
  // Items of any one list or dict value (also range() and what a string
  // iterates into), checked where lists grow.
  size_t max_items = size_t(1) << 20;
  // Bytes of all the strings expressions evaluate to, together: a bound on
  // the memory and copying a template can cause (Python would share the
  // strings; rinfer copies them).
  size_t max_bytes = size_t(1) << 30;
};

// The running counts of one render. The interpreter owns one and makes it
// current for its thread while it renders, so that the value functions
// (printing, comparing, tojson) charge the same budget; outside a render
// they run under a fresh default one.
class Meter {
 public:
  explicit Meter(const Budget& b) : b_(b) {}
  const Budget& budget() const { return b_; }

  // The template line being evaluated, for error messages.
  void at(int line) { line_ = line; }
  int line() const { return line_; }

  void step(int64_t n = 1) {
    steps_ += n;
    if (steps_ > b_.max_steps) exceeded("more than " + std::to_string(b_.max_steps) + " evaluation steps");
  }
  // A string of n bytes is about to exist.
  void string_size(size_t n) {
    if (n > b_.max_string) exceeded("string longer than " + std::to_string(b_.max_string) + " bytes");
  }
  // A list or dict of n items is about to exist.
  void items(size_t n) {
    if (n > b_.max_items) exceeded("list longer than " + std::to_string(b_.max_items) + " items");
  }
  // An expression evaluated to a string of n bytes.
  void produced(size_t n) {
    string_size(n);
    bytes_ += n;
    if (bytes_ > b_.max_bytes)
      exceeded("more than " + std::to_string(b_.max_bytes) + " bytes of strings evaluated");
  }
  void output(size_t n) {
    if (n > b_.max_output) exceeded("output larger than " + std::to_string(b_.max_output) + " bytes");
  }
  // Value nesting (printing, comparing, serializing).
  void nesting(int depth) {
    if (depth > b_.max_nesting) exceeded("value nested deeper than " + std::to_string(b_.max_nesting));
  }

  // Throws "chat template: line N: <what>".
  [[noreturn]] void exceeded(const std::string& what) const;

  static Meter* current();
  // Makes a meter current for this thread for its lifetime.
  class Use {
   public:
    explicit Use(Meter* m);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    Meter* prev_;
  };

 private:
  Budget b_;
  int line_ = 0;
  int64_t steps_ = 0;
  size_t bytes_ = 0;
};

// The current meter, or `fallback` (a default one) when none is current.
inline Meter& current_meter(Meter& fallback) {
  Meter* m = Meter::current();
  return m ? *m : fallback;
}

}  // namespace rinfer::jinja

#pragma once
// Errors: every failure a user can cause (bad file, bad option, bad request)
// is thrown as rinfer::Error with a one-line message; the CLI prints it and
// exits non-zero. Internal invariants use RINFER_ASSERT.
#include <sstream>
#include <stdexcept>
#include <string>

namespace rinfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Concatenate anything streamable into one string: str("layer ", i, " of ", n).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str(args...));
}

}  // namespace rinfer

#define RINFER_CHECK(cond, ...)              \
  do {                                       \
    if (!(cond)) ::rinfer::fail(__VA_ARGS__); \
  } while (0)

#define RINFER_ASSERT(cond)                                                          \
  do {                                                                               \
    if (!(cond))                                                                     \
      ::rinfer::fail("internal error: ", #cond, " at ", __FILE__, ":", __LINE__);    \
  } while (0)

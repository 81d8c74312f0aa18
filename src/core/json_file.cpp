#include "core/json_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace rinfer {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read ", path, ": ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    // parser messages can quote input bytes: keep the error on one line
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    fail(path, " is not valid JSON: ", msg);
  }
}

}  // namespace rinfer

#pragma once
// Write a whole file under a temporary name in the same folder, then rename:
// readers see the old file or the complete new one, never a partial write.
#include <string>

namespace rinfer {

void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace rinfer

#pragma once
// Parses template source into statements. Anything outside the supported
// subset is a one-line rinfer::Error naming it ("chat template: line 3:
// unsupported tag \"include\""), never a silently wrong prompt.
#include <string>

#include "tokenizer/jinja/ast.h"

namespace rinfer::jinja {

Body parse_template(const std::string& source);

}  // namespace rinfer::jinja

#pragma once
// Parses template source into statements. Anything outside the supported
// subset is a one-line rinfer::Error naming it ("chat template: line 3:
// unsupported tag \"include\""), never a silently wrong prompt.
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/budget.h"

namespace rinfer::jinja {

// Nesting (blocks in blocks plus the expression tree at each point,
// parentheses included) deeper than budget.max_nesting is an error, so
// that neither the parser nor the evaluation of what it built runs out of
// stack.
Body parse_template(const std::string& source, const Budget& budget = {});

}  // namespace rinfer::jinja

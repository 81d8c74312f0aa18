#pragma once
// A Jinja template of the subset Hugging Face chat templates use, rendered
// as transformers renders them (trim_blocks, lstrip_blocks, loop controls,
// Python semantics for values): for/if/elif/else/set (incl. block set),
// macros, namespaces, loop variables, filters, string/dict/list methods,
// tests, raise_exception, strftime_now. Anything else is a one-line
// rinfer::Error that names it.
#include <memory>
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/budget.h"
#include "tokenizer/jinja/value.h"

namespace rinfer::jinja {

class Template {
 public:
  // Parses; throws on bad syntax or nesting deeper than the budget's.
  explicit Template(const std::string& source, const Budget& budget = {});
  // globals: the variables the template sees (messages, bos_token, ...).
  // Throws a one-line rinfer::Error for template errors and for going past
  // the budget (budget.h).
  std::string render(const Dict& globals) const;
  const Budget& budget() const { return budget_; }

 private:
  Budget budget_;
  Body body_;
};

}  // namespace rinfer::jinja

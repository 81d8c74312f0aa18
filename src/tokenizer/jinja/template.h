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
#include "tokenizer/jinja/value.h"

namespace rinfer::jinja {

class Template {
 public:
  explicit Template(const std::string& source);  // parses; throws on bad syntax
  // globals: the variables the template sees (messages, bos_token, ...).
  std::string render(const Dict& globals) const;

 private:
  Body body_;
};

}  // namespace rinfer::jinja

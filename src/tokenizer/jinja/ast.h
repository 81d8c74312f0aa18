#pragma once
// The parsed template: expressions and statements of the Jinja subset.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace rinfer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    Literal,    // value
    Name,       // name
    ListLit,    // args
    DictLit,    // kwargs (keys are expressions in args[2i], values args[2i+1])
    Attr,       // a.name
    Index,      // a[b]
    Slice,      // a[b:c:d] (absent parts are null)
    Call,       // a(args, kwargs)
    Filter,     // a | name(args, kwargs)
    Test,       // a is [not] name(args)
    Unary,      // name = "not" | "-" | "+", a
    Binary,     // a name b: or and == != < > <= >= in "not in" + - * / // % ** ~
    Cond,       // a if b else c
  } kind;
  int line = 0;
  int depth = 1;  // of the tree under this node (the parser bounds it: Budget::max_nesting)
  Value value;
  std::string name;
  bool negate = false;
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum Kind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue } kind;
  int line = 0;
  std::string text;                                   // Text
  ExprPtr expr;                                       // Output; For iterable; Set value
  std::vector<std::pair<ExprPtr, Body>> branches;     // If (else: null condition)
  std::vector<std::string> targets;                   // For loop variables; Set target (name[, attribute])
  ExprPtr filter;                                     // For ... if filter
  Body body, else_body;                               // For, SetBlock, Macro
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro parameters (default or null)
};

}  // namespace rinfer::jinja

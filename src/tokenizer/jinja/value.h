#pragma once
// Values of the Jinja subset rinfer renders chat templates with: Python's
// None/bool/int/float/str/list/dict plus Jinja's Undefined, namespace
// objects and callables. Printing, truthiness, equality and ordering follow
// Python, because transformers renders with Python Jinja2.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/budget.h"

namespace rinfer::jinja {

struct Value;
using List = std::vector<Value>;
// Insertion-ordered, as Python dicts (tojson and iteration keep key order).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& k) const;
  Value* find(const std::string& k);
  void set(const std::string& k, Value v);
};
struct Undefined {
  std::string name;  // for error messages
};
struct None {};
// A builtin function or bound method: positional args, keyword args.
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Value(std::vector<Value>&, Kwargs&)>;

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>, std::shared_ptr<Dict>,
               std::shared_ptr<Function>>
      v;
  bool is_namespace = false;  // a dict created by namespace(): attributes are assignable

  Value() : v(Undefined{}) {}
  // A list or dict nested a million deep (built in a loop) is released
  // without recursing once per level (value.cpp).
  ~Value() {
    if (v.index() == kListIndex || v.index() == kDictIndex) release();
  }
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  Value(None) : v(None{}) {}
  Value(bool b) : v(b) {}
  Value(int64_t i) : v(i) {}
  Value(int i) : v(int64_t(i)) {}
  Value(double d) : v(d) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(List l) : v(std::make_shared<List>(std::move(l))) {}
  Value(Dict d) : v(std::make_shared<Dict>(std::move(d))) {}
  Value(Function f) : v(std::make_shared<Function>(std::move(f))) {}
  static Value undefined(std::string name) {
    Value x;
    x.v = Undefined{std::move(name)};
    return x;
  }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Function>>(v); }

  const std::string& str() const { return std::get<std::string>(v); }
  List& list() const { return *std::get<std::shared_ptr<List>>(v); }
  Dict& dict() const { return *std::get<std::shared_ptr<Dict>>(v); }
  // Python's float(x) of a number or bool; anything else is an error.
  double number() const {
    if (is_int()) return double(std::get<int64_t>(v));
    if (is_float()) return std::get<double>(v);
    return number_slow();
  }
  // Python's int(x) of a number or bool: a float is truncated, and one
  // that is NaN, infinite or outside int64 is an error (never UB).
  int64_t integer() const { return is_int() ? std::get<int64_t>(v) : integer_slow(); }

  bool truthy() const;
  // Python str(x) (what {{ x }} prints; Undefined prints nothing).
  std::string to_string() const;
  // Python repr(x) (used inside lists and dicts).
  std::string repr() const;
  const char* type_name() const;

 private:
  static constexpr size_t kListIndex = 6, kDictIndex = 7;  // positions in the variant
  void release() noexcept;
  double number_slow() const;
  int64_t integer_slow() const;
};

// Python's int(d): truncated; throws (one line) for NaN, infinity and
// values outside int64.
int64_t float_to_int(double d);

bool equal(const Value& a, const Value& b);
// Python's a < b for numbers, strings and lists; throws otherwise.
bool less(const Value& a, const Value& b);

Value from_json(const nlohmann::ordered_json& j);
// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent,
// sort_keys=sort_keys) with Python's separators.
std::string to_json(const Value& v, int indent = -1, bool sort_keys = false);

}  // namespace rinfer::jinja

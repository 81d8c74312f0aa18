// Evaluation of parsed templates, with the builtins (filters, tests,
// methods, global functions) that real chat templates call.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/unicode/unicode.h"
#include "tokenizer/utf8.h"

namespace rinfer::jinja {

namespace {

[[noreturn]] void error(int line, const std::string& msg) { fail("chat template: line ", line, ": ", msg); }

// The budget of the render running on this thread (Interpreter makes its
// meter current), for the helpers below that grow strings and lists.
Meter& meter() {
  Meter* m = Meter::current();
  RINFER_ASSERT(m);
  return *m;
}

// Integer arithmetic leaves int64 with an error, never UB (Python would
// give a big int).
[[noreturn]] void int_overflow(int line, int64_t a, const char* op, int64_t b) {
  error(line, "integer overflow in " + std::to_string(a) + " " + op + " " + std::to_string(b));
}

int64_t int_pow(int64_t base, int64_t exp, int line) {
  int64_t r = 1, b = base;
  for (int64_t e = exp; e > 0;) {
    if ((e & 1) && __builtin_mul_overflow(r, b, &r)) int_overflow(line, base, "**", exp);
    e >>= 1;
    // b is needed again only while bits remain; if b*b overflows then, the
    // result would too (|result| >= |b*b|).
    if (e > 0 && __builtin_mul_overflow(b, b, &b)) int_overflow(line, base, "**", exp);
  }
  return r;
}

// The number of items of range(start, stop, step) / a slice walk, without
// stepping past int64.
uint64_t walk_count(int64_t start, int64_t stop, int64_t step) {
  if (step > 0 ? start >= stop : start <= stop) return 0;
  const auto span = step > 0 ? uint64_t(stop) - uint64_t(start) : uint64_t(start) - uint64_t(stop);
  const auto st = step > 0 ? uint64_t(step) : uint64_t(0) - uint64_t(step);
  return (span - 1) / st + 1;
}

// start + k * step for k < walk_count(...): the result lies between start
// and stop, the product may not fit in int64; wrapping arithmetic is exact.
int64_t walk_at(int64_t start, uint64_t k, int64_t step) {
  return int64_t(uint64_t(start) + k * uint64_t(step));
}

// Python's str.strip family: no argument strips Unicode whitespace,
// otherwise any of the given characters.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  if (!chars || chars->is_none() || chars->is_undefined()) {
    std::string_view v = s;
    if (left) v = utf8::lstrip(v);
    if (right) v = utf8::rstrip(v);
    return std::string(v);
  }
  const std::string& set = chars->str();
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && set.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && set.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->is_none()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && utf8::is_python_space(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        out.push_back(std::string(utf8::rstrip(s.substr(i))));
        break;
      }
      size_t j = i;
      while (j < s.size() && !utf8::is_python_space(static_cast<unsigned char>(s[j]))) ++j;
      meter().items(out.size() + 1);
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = sep->str();
  RINFER_CHECK(!d.empty(), "chat template: split: empty separator");
  size_t i = 0;
  while (true) {
    const size_t j = s.find(d, i);
    if (j == std::string::npos || (maxsplit >= 0 && int64_t(out.size()) == maxsplit)) {
      out.push_back(s.substr(i));
      break;
    }
    meter().items(out.size() + 1);
    out.push_back(s.substr(i, j - i));
    i = j + d.size();
  }
  return out;
}

std::string replace_str(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t i = 0;
  int64_t n = 0;
  for (size_t j; (count < 0 || n < count) && (j = s.find(from, i)) != std::string::npos; ++n) {
    out.append(s, i, j - i);
    out += to;
    i = j + from.size();
    meter().string_size(out.size());
  }
  out.append(s, i);
  meter().string_size(out.size());
  return out;
}

std::string title_case(const std::string& s, bool only_first) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha && start)
      c = char(std::toupper(static_cast<unsigned char>(c)));
    else if (alpha)
      c = char(std::tolower(static_cast<unsigned char>(c)));
    if (!only_first) start = !alpha;
    else start = false;
  }
  return out;
}

std::string upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

const Value* arg(std::vector<Value>& args, Kwargs& kw, size_t i, const char* name) {
  for (auto& [k, v] : kw)
    if (k == name) return &v;
  return i < args.size() ? &args[i] : nullptr;
}

// Items of an iterable value: list elements, dict keys, string characters.
// Charges a step per item (the copy).
List iterate(const Value& v, int line) {
  if (v.is_list()) {
    meter().step(int64_t(v.list().size()));
    return v.list();
  }
  if (v.is_undefined() || v.is_none()) {
    if (v.is_none()) error(line, "'NoneType' object is not iterable");
    return {};
  }
  if (v.is_dict()) {
    meter().step(int64_t(v.dict().items.size()));
    List l;
    for (const auto& [k, x] : v.dict().items) l.emplace_back(k);
    return l;
  }
  if (v.is_string()) {
    List l;
    const std::string& s = v.str();
    size_t chars = 0;
    for (char c : s) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    meter().items(chars);
    meter().step(int64_t(chars));
    l.reserve(chars);
    for (size_t i = 0; i < s.size();) {
      size_t len = 0;
      utf8::decode_at(s, i, &len);
      l.emplace_back(s.substr(i, len));
      i += len;
    }
    return l;
  }
  error(line, std::string("'") + v.type_name() + "' object is not iterable");
}

int64_t py_len(const Value& v, int line) {
  if (v.is_string()) {
    int64_t n = 0;
    for (char c : v.str()) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
  }
  if (v.is_list()) return int64_t(v.list().size());
  if (v.is_dict()) return int64_t(v.dict().items.size());
  if (v.is_undefined()) return 0;
  error(line, std::string("object of type '") + v.type_name() + "' has no len()");
}

class Interpreter {
 public:
  Interpreter(const Dict& globals, const Budget& budget) : meter_(budget), use_(&meter_) {
    scopes_.emplace_back();
    for (const auto& [k, v] : globals.items) scopes_.back()[k] = v;
    add_builtins();
  }

  ~Interpreter() { mutated_.clear_all(); }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, std::string& out) {
    for (const auto& n : body) {
      const Flow f = exec(*n, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  // The containers the template changed (list.append, {% set ns.x %}).
  // Only a change can close a cycle (x.append([x])), and every cycle holds
  // a changed container, so emptying those still alive when the render
  // ends frees every cycle (shared_ptr alone would leak them). Dead and
  // repeated entries are pruned whenever the list doubles.
  class Mutated {
   public:
    template <class T>
    void add(const std::shared_ptr<T>& p) {
      if (!items_.empty() && items_.back().raw == p.get() && !items_.back().ref.expired()) return;
      items_.push_back({p.get(), p, std::is_same_v<T, List>});
      if (items_.size() >= prune_at_) prune();
    }
    void clear_all() {
      for (auto& e : items_) {
        std::shared_ptr<void> p = e.ref.lock();
        if (!p) continue;
        if (e.is_list)
          static_cast<List*>(p.get())->clear();
        else
          static_cast<Dict*>(p.get())->items.clear();
      }
      items_.clear();
    }

   private:
    struct Entry {
      const void* raw;
      std::weak_ptr<void> ref;
      bool is_list;
    };
    void prune() {
      std::erase_if(items_, [](const Entry& e) { return e.ref.expired(); });
      std::sort(items_.begin(), items_.end(), [](const Entry& a, const Entry& b) { return a.raw < b.raw; });
      items_.erase(std::unique(items_.begin(), items_.end(), [](const Entry& a, const Entry& b) { return a.raw == b.raw; }),
                   items_.end());
      prune_at_ = std::max<size_t>(64, 2 * items_.size());
    }
    std::vector<Entry> items_;
    size_t prune_at_ = 64;
  };

  // The evaluation-depth guard of the budget, at the entries of exec,
  // eval and apply_filter (a macro call goes through them): a recursive
  // macro or a filter chain ends here, not in a stack overflow. It also
  // tracks the line for the budget's messages and charges one step.
  class Nest {
   public:
    Nest(Interpreter& in, int line) : in_(in), line_(in.meter_.line()) {
      if (line > 0) in.meter_.at(line);
      if (++in.depth_ > in.meter_.budget().max_depth) {
        --in.depth_;
        in.meter_.exceeded("recursion deeper than " + std::to_string(in.meter_.budget().max_depth));
      }
      in.meter_.step();
    }
    ~Nest() {
      --in_.depth_;
      in_.meter_.at(line_);
    }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Interpreter& in_;
    int line_;
  };

  void emit(std::string& out, const std::string& s) {
    meter_.output(out.size() + s.size());
    out += s;
  }

  Flow exec(const Node& n, std::string& out) {
    Nest nest(*this, n.line);
    switch (n.kind) {
      case Node::Text: emit(out, n.text); return Flow::Normal;
      case Node::Output: emit(out, eval(*n.expr).to_string()); return Flow::Normal;
      case Node::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond).truthy()) return exec(body, out);
        return Flow::Normal;
      case Node::For: return exec_for(n, out);
      case Node::Set: assign(n, eval(*n.expr)); return Flow::Normal;
      case Node::SetBlock: {
        std::string s;
        exec(n.body, s);
        assign(n, Value(std::move(s)));
        return Flow::Normal;
      }
      case Node::Macro: define_macro(n); return Flow::Normal;
      case Node::Break: return Flow::Break;
      case Node::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  void assign(const Node& n, Value v) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = std::move(v);
      return;
    }
    Value ns = lookup(n.targets[0]);
    if (!ns.is_dict() || !ns.is_namespace) error(n.line, "cannot assign attribute on non-namespace object");
    if (v.is_dict() && &v.dict() == &ns.dict()) error(n.line, "a namespace cannot contain itself");
    mutated_.add(std::get<std::shared_ptr<Dict>>(ns.v));
    ns.dict().set(n.targets[1], std::move(v));
  }

  Flow exec_for(const Node& n, std::string& out) {
    List items = iterate(eval(*n.expr), n.line);
    if (n.filter) {
      List kept;
      for (auto& it : items) {
        scopes_.emplace_back();
        bind_targets(n, it);
        const bool keep = eval(*n.filter).truthy();
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(it));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (!n.else_body.empty()) exec(n.else_body, out);
      return Flow::Normal;
    }
    const auto len = int64_t(items.size());
    for (int64_t i = 0; i < len; ++i) {
      // An iteration builds a scope and the loop object: a few steps' work
      // (and an empty body still costs).
      meter_.step(4);
      scopes_.emplace_back();
      bind_targets(n, items[size_t(i)]);
      Dict loop;
      loop.set("index0", Value(i));
      loop.set("index", Value(i + 1));
      loop.set("revindex0", Value(len - i - 1));
      loop.set("revindex", Value(len - i));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == len - 1));
      loop.set("length", Value(len));
      loop.set("previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("previtem"));
      loop.set("nextitem", i + 1 < len ? items[size_t(i + 1)] : Value::undefined("nextitem"));
      loop.set("cycle", Value(Function([i](std::vector<Value>& a, Kwargs&) -> Value {
                 if (a.empty()) return Value(None{});
                 return a[size_t(i) % a.size()];
               })));
      scopes_.back()["loop"] = Value(std::move(loop));
      const Flow f = exec(n.body, out);
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void bind_targets(const Node& n, const Value& item) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = item;
      return;
    }
    List parts = iterate(item, n.line);
    if (parts.size() != n.targets.size())
      error(n.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                        std::to_string(n.targets.size()) + " loop variables");
    for (size_t k = 0; k < parts.size(); ++k) scopes_.back()[n.targets[k]] = parts[k];
  }

  void define_macro(const Node& n) {
    const Node* node = &n;
    scopes_.back()[n.targets[0]] = Value(Function([this, node](std::vector<Value>& a, Kwargs& kw) -> Value {
      Scope s;
      for (size_t i = 0; i < node->params.size(); ++i) {
        const auto& [name, dflt] = node->params[i];
        const Value* v = arg(a, kw, i, name.c_str());
        s[name] = v ? *v : dflt ? eval(*dflt) : Value::undefined(name);
      }
      scopes_.push_back(std::move(s));
      std::string out;
      exec(node->body, out);
      scopes_.pop_back();
      return Value(std::move(out));
    }));
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return f->second;
    return Value::undefined(name);
  }

  // --- expressions -----------------------------------------------------

  // Every expression: the depth guard and a step on entry; on exit the
  // size of what it evaluated to (a string's bytes, a list's items).
  Value eval(const Expr& e) {
    Nest nest(*this, e.line);
    Value v = eval_node(e);
    if (v.is_string())
      meter_.produced(v.str().size());
    else if (v.is_list())
      meter_.items(v.list().size());
    else if (v.is_dict())
      meter_.items(v.dict().items.size());
    return v;
  }

  Value eval_node(const Expr& e) {
    switch (e.kind) {
      case Expr::Literal: return e.value;
      case Expr::Name: return lookup(e.name);
      case Expr::ListLit: {
        List l;
        for (const auto& a : e.args) l.push_back(eval(*a));
        return Value(std::move(l));
      }
      case Expr::DictLit: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i]);
          if (!k.is_string()) error(e.line, "only string keys are supported in dict literals");
          d.set(k.str(), eval(*e.args[i + 1]));
        }
        return Value(std::move(d));
      }
      case Expr::Attr: return get_attr(eval(*e.a), e.name, e.line);
      case Expr::Index: return get_item(eval(*e.a), eval(*e.b), e.line);
      case Expr::Slice: return slice(e);
      case Expr::Call: {
        Value f = eval(*e.a);
        std::vector<Value> args;
        Kwargs kw;
        for (const auto& a : e.args) args.push_back(eval(*a));
        for (const auto& [k, v] : e.kwargs) kw.emplace_back(k, eval(*v));
        if (!f.is_callable()) {
          const std::string name = e.a->kind == Expr::Name ? e.a->name : e.a->kind == Expr::Attr ? e.a->name : "";
          if (f.is_undefined()) error(e.line, "'" + name + "' is undefined (unsupported function?)");
          error(e.line, std::string("'") + f.type_name() + "' object is not callable");
        }
        return (*std::get<std::shared_ptr<Function>>(f.v))(args, kw);
      }
      case Expr::Filter: return filter(e);
      case Expr::Test: {
        const bool r = test(e);
        return Value(e.negate ? !r : r);
      }
      case Expr::Unary: {
        Value a = eval(*e.a);
        if (e.name == "not") return Value(!a.truthy());
        if (!a.is_number() && !a.is_bool()) error(e.line, std::string("bad operand type for unary ") + e.name);
        if (e.name == "+") return a;
        if (a.is_float()) return Value(-a.number());
        if (a.integer() == std::numeric_limits<int64_t>::min()) int_overflow(e.line, 0, "-", a.integer());
        return Value(-a.integer());
      }
      case Expr::Binary: return binary(e);
      case Expr::Cond:
        if (eval(*e.b).truthy()) return eval(*e.a);
        return e.c ? eval(*e.c) : Value::undefined("");
    }
    return Value();
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.a);
      return a.truthy() ? eval(*e.b) : a;
    }
    if (op == "or") {
      Value a = eval(*e.a);
      return a.truthy() ? a : eval(*e.b);
    }
    Value a = eval(*e.a), b = eval(*e.b);
    if (op == "==") return Value(equal(a, b));
    if (op == "!=") return Value(!equal(a, b));
    if (op == "<") return Value(less(a, b));
    if (op == ">") return Value(less(b, a));
    if (op == "<=") return Value(!less(b, a));
    if (op == ">=") return Value(!less(a, b));
    if (op == "in") return Value(contains(b, a, e.line));
    if (op == "not in") return Value(!contains(b, a, e.line));
    if (op == "~") {
      std::string x = a.to_string(), y = b.to_string();
      meter_.string_size(x.size() + y.size());
      return Value(x + y);
    }
    if (a.is_undefined() || b.is_undefined())
      error(e.line, "'" + std::get<Undefined>((a.is_undefined() ? a : b).v).name + "' is undefined");
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        meter_.string_size(a.str().size() + b.str().size());
        return Value(a.str() + b.str());
      }
      if (a.is_list() && b.is_list()) {
        meter_.items(a.list().size() + b.list().size());
        meter_.step(int64_t(a.list().size() + b.list().size()));
        List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value(std::move(l));
      }
    }
    if (op == "*" && ((a.is_string() && b.is_int()) || (a.is_int() && b.is_string()))) {
      const std::string& s = a.is_string() ? a.str() : b.str();
      const int64_t n = a.is_int() ? a.integer() : b.integer();
      std::string r;
      if (n <= 0 || s.empty()) return Value(std::move(r));
      // Checked before anything is allocated: 'a' * 10**10.
      if (uint64_t(n) > meter_.budget().max_string / s.size()) meter_.string_size(meter_.budget().max_string + 1);
      const size_t total = s.size() * size_t(n);
      meter_.string_size(total);
      r.reserve(total);
      r = s;
      while (r.size() < total) r.append(r, 0, std::min(r.size(), total - r.size()));  // doubling
      return Value(std::move(r));
    }
    const bool nums = (a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool());
    if (!nums)
      error(e.line, std::string("unsupported operand types for ") + op + ": '" + a.type_name() + "' and '" +
                        b.type_name() + "'");
    const bool ints = !a.is_float() && !b.is_float();
    if (ints && (op == "+" || op == "-" || op == "*")) {
      const int64_t x = a.integer(), y = b.integer();
      int64_t r;
      const bool over = op == "+"   ? __builtin_add_overflow(x, y, &r)
                        : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                    : __builtin_mul_overflow(x, y, &r);
      if (over) int_overflow(e.line, x, op.c_str(), y);
      return Value(r);
    }
    if (op == "+") return Value(a.number() + b.number());
    if (op == "-") return Value(a.number() - b.number());
    if (op == "*") return Value(a.number() * b.number());
    if (op == "/") {
      if (b.number() == 0) error(e.line, "division by zero");
      return Value(a.number() / b.number());
    }
    if (op == "//" || op == "%") {
      if (b.number() == 0) error(e.line, "division by zero");
      if (ints) {
        const int64_t x = a.integer(), y = b.integer();
        if (y == -1) {  // x / -1 and x % -1 are UB for the smallest x
          if (op == "%") return Value(int64_t(0));
          if (x == std::numeric_limits<int64_t>::min()) int_overflow(e.line, x, "//", y);
          return Value(-x);
        }
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // Python floors
        return op == "//" ? Value(q) : Value(x - q * y);
      }
      const double q = std::floor(a.number() / b.number());
      return op == "//" ? Value(q) : Value(a.number() - q * b.number());
    }
    if (op == "**") {
      if (ints && b.integer() >= 0) return Value(int_pow(a.integer(), b.integer(), e.line));
      const double x = a.number(), y = b.number();
      if (x == 0 && y < 0) error(e.line, "zero cannot be raised to a negative power");
      const double r = std::pow(x, y);
      // Python raises OverflowError here (a float result would be inf).
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
        error(e.line, "float overflow in " + a.repr() + " ** " + b.repr());
      return Value(r);
    }
    error(e.line, "unsupported operator " + op);
  }

  bool contains(const Value& hay, const Value& needle, int line) {
    if (hay.is_string()) {
      if (!needle.is_string()) error(line, "'in <string>' requires string as left operand");
      return hay.str().find(needle.str()) != std::string::npos;
    }
    if (hay.is_list()) {
      for (const auto& x : hay.list())
        if (equal(x, needle)) return true;
      return false;
    }
    if (hay.is_dict()) return needle.is_string() && hay.dict().find(needle.str()) != nullptr;
    if (hay.is_undefined()) return false;
    error(line, std::string("argument of type '") + hay.type_name() + "' is not iterable");
  }

  Value slice(const Expr& e) {
    Value v = eval(*e.a);
    const bool is_str = v.is_string();
    if (!is_str && !v.is_list()) error(e.line, std::string("'") + v.type_name() + "' object is not subscriptable");
    // A string is cut at its characters' offsets (no list of characters).
    std::vector<size_t> offsets;
    if (is_str) {
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size(); ++i)
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
      offsets.push_back(s.size());
    }
    const auto n = is_str ? int64_t(offsets.size() - 1) : int64_t(v.list().size());
    const int64_t step = e.d ? eval(*e.d).integer() : 1;
    if (step == 0) error(e.line, "slice step cannot be zero");
    auto bound = [&](const ExprPtr& x, int64_t dflt) {
      if (!x) return dflt;
      Value b = eval(*x);
      if (b.is_none()) return dflt;
      int64_t i = b.integer();
      if (i < 0) i += n;
      if (step > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t start = bound(e.b, step > 0 ? 0 : n - 1), stop = bound(e.c, step > 0 ? n : -1);
    const uint64_t count = walk_count(start, stop, step);  // <= n: no stepping past int64
    if (!is_str) {
      meter_.step(int64_t(count));  // (a string's bytes are charged when it is evaluated)
      List out;
      out.reserve(count);
      for (uint64_t k = 0; k < count; ++k) out.push_back(v.list()[size_t(walk_at(start, k, step))]);
      return Value(std::move(out));
    }
    const std::string& src = v.str();
    std::string s;
    for (uint64_t k = 0; k < count; ++k) {
      const auto i = size_t(walk_at(start, k, step));
      s.append(src, offsets[i], offsets[i + 1] - offsets[i]);
    }
    return Value(std::move(s));
  }

  Value get_item(const Value& v, const Value& key, int line) {
    if (v.is_undefined()) error(line, "'" + std::get<Undefined>(v.v).name + "' is undefined");
    if (v.is_dict()) {
      if (key.is_string())
        if (const Value* x = v.dict().find(key.str())) return *x;
      return key.is_string() ? get_attr(v, key.str(), line, /*item_first=*/true) : Value::undefined("");
    }
    if (v.is_list() && (key.is_int() || key.is_bool())) {
      const List& items = v.list();
      int64_t i = key.integer();
      if (i < 0) i += int64_t(items.size());
      if (i < 0 || i >= int64_t(items.size())) return Value::undefined("index");
      return items[size_t(i)];
    }
    if (v.is_string() && (key.is_int() || key.is_bool())) {  // the i-th character, without a list of them
      const std::string& s = v.str();
      const int64_t n = py_len(v, line);
      int64_t i = key.integer();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index");
      size_t b = 0;
      for (int64_t c = -1; b < s.size(); ++b)
        if ((static_cast<unsigned char>(s[b]) & 0xC0) != 0x80 && ++c == i) break;
      size_t len = 1;
      while (b + len < s.size() && (static_cast<unsigned char>(s[b + len]) & 0xC0) == 0x80) ++len;
      return Value(s.substr(b, len));
    }
    if (key.is_string()) return get_attr(v, key.str(), line);
    return Value::undefined("");
  }

  // Jinja's getattr: an attribute (a method) first, then the item.
  Value get_attr(const Value& v, const std::string& name, int line, bool item_first = false) {
    if (v.is_undefined()) error(line, "'" + std::get<Undefined>(v.v).name + "' is undefined");
    if (v.is_dict()) {
      if (!v.is_namespace) {
        if (Value m = method(v, name, line); !m.is_undefined() && !item_first) return m;
      }
      if (const Value* x = v.dict().find(name)) return *x;
      if (item_first && !v.is_namespace) return method(v, name, line);
      return Value::undefined(name);
    }
    return method(v, name, line);
  }

  Value method(const Value& self, const std::string& name, int line) {
    auto fn = [](auto f) { return Value(Function(std::move(f))); };
    if (self.is_string()) {
      const std::string s = self.str();
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const bool l = name != "rstrip", r = name != "lstrip";
        return fn([s, l, r](std::vector<Value>& a, Kwargs&) {
          return Value(py_strip(s, a.empty() ? nullptr : &a[0], l, r));
        });
      }
      if (name == "split")
        return fn([s](std::vector<Value>& a, Kwargs& kw) {
          const Value* sep = arg(a, kw, 0, "sep");
          const Value* mx = arg(a, kw, 1, "maxsplit");
          List l;
          for (auto& p : py_split(s, sep, mx ? mx->integer() : -1)) l.emplace_back(std::move(p));
          return Value(std::move(l));
        });
      if (name == "startswith" || name == "endswith") {
        const bool start = name == "startswith";
        return fn([s, start](std::vector<Value>& a, Kwargs&) {
          if (a.empty()) return Value(false);
          List opts = a[0].is_list() ? a[0].list() : List{a[0]};
          for (const auto& o : opts)
            if (o.is_string() && (start ? s.starts_with(o.str()) : s.ends_with(o.str()))) return Value(true);
          return Value(false);
        });
      }
      if (name == "upper") return fn([s](std::vector<Value>&, Kwargs&) { return Value(upper(s)); });
      if (name == "lower") return fn([s](std::vector<Value>&, Kwargs&) { return Value(unicode::to_lower(s)); });
      if (name == "title") return fn([s](std::vector<Value>&, Kwargs&) { return Value(title_case(s, false)); });
      if (name == "capitalize")
        return fn([s](std::vector<Value>&, Kwargs&) { return Value(title_case(s, true)); });
      if (name == "replace")
        return fn([s, line](std::vector<Value>& a, Kwargs&) {
          if (a.size() < 2 || !a[0].is_string() || !a[1].is_string()) error(line, "replace() takes two strings");
          return Value(replace_str(s, a[0].str(), a[1].str(), a.size() > 2 ? a[2].integer() : -1));
        });
      if (name == "find")
        return fn([s](std::vector<Value>& a, Kwargs&) {
          const size_t p = a.empty() ? std::string::npos : s.find(a[0].to_string());
          return Value(p == std::string::npos ? int64_t(-1) : int64_t(p));
        });
      if (name == "count")
        return fn([s](std::vector<Value>& a, Kwargs&) {
          int64_t n = 0;
          const std::string sub = a.empty() ? "" : a[0].to_string();
          if (sub.empty()) return Value(int64_t(0));
          for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
          return Value(n);
        });
      if (name == "join")
        return fn([s, line](std::vector<Value>& a, Kwargs&) {
          std::string out;
          List items = a.empty() ? List{} : iterate(a[0], line);
          for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += s;
            out += items[i].to_string();
            meter().string_size(out.size());
          }
          return Value(std::move(out));
        });
      if (name == "isdigit" || name == "isspace" || name == "isalpha")
        return fn([s, name](std::vector<Value>&, Kwargs&) {
          if (s.empty()) return Value(false);
          for (char c : s) {
            const auto u = static_cast<unsigned char>(c);
            const bool ok = name == "isdigit" ? std::isdigit(u) : name == "isspace" ? std::isspace(u) : std::isalpha(u);
            if (!ok) return Value(false);
          }
          return Value(true);
        });
      return Value::undefined(name);
    }
    if (self.is_dict()) {
      const Value d = self;
      if (name == "items")
        return fn([d](std::vector<Value>&, Kwargs&) {
          List l;
          for (const auto& [k, v] : d.dict().items) l.push_back(Value(List{Value(k), v}));
          return Value(std::move(l));
        });
      if (name == "keys")
        return fn([d](std::vector<Value>&, Kwargs&) {
          List l;
          for (const auto& [k, v] : d.dict().items) l.emplace_back(k);
          return Value(std::move(l));
        });
      if (name == "values")
        return fn([d](std::vector<Value>&, Kwargs&) {
          List l;
          for (const auto& [k, v] : d.dict().items) l.push_back(v);
          return Value(std::move(l));
        });
      if (name == "get")
        return fn([d](std::vector<Value>& a, Kwargs&) {
          if (!a.empty() && a[0].is_string())
            if (const Value* v = d.dict().find(a[0].str())) return *v;
          return a.size() > 1 ? a[1] : Value(None{});
        });
      return Value::undefined(name);
    }
    if (self.is_list()) {
      const Value l = self;
      if (name == "append")
        return fn([this, l, line](std::vector<Value>& a, Kwargs&) {
          for (auto& x : a) {
            // Python allows it; printing it would need Python's [[...]].
            // (Indirect cycles, x.append([x]), end at the nesting limit
            // when printed or compared.)
            if (x.is_list() && &x.list() == &l.list()) error(line, "a list cannot contain itself");
            meter().items(l.list().size() + 1);
            mutated_.add(std::get<std::shared_ptr<List>>(l.v));
            l.list().push_back(x);
          }
          return Value(None{});
        });
      if (name == "index")
        return fn([l, line](std::vector<Value>& a, Kwargs&) {
          for (size_t i = 0; i < l.list().size(); ++i)
            if (!a.empty() && equal(l.list()[i], a[0])) return Value(int64_t(i));
          error(line, "value is not in list");
        });
      return Value::undefined(name);
    }
    return Value::undefined(name);
  }

  // --- filters and tests -------------------------------------------------

  Value filter(const Expr& e) {
    Value v = eval(*e.a);
    std::vector<Value> a;
    Kwargs kw;
    for (const auto& x : e.args) a.push_back(eval(*x));
    for (const auto& [k, x] : e.kwargs) kw.emplace_back(k, eval(*x));
    return apply_filter(e.name, v, a, kw, e.line);
  }

  Value apply_filter(const std::string& f, Value v, std::vector<Value>& a, Kwargs& kw, int line) {
    Nest nest(*this, line);  // map('map', 'map', ...) recurses here
    static const std::unordered_set<std::string> kFilters = {
        "default", "d", "trim", "lower", "upper", "title", "capitalize", "length", "count", "string", "safe",
        "escape", "e", "first", "last", "list", "reverse", "join", "tojson", "int", "float", "abs", "round",
        "replace", "indent", "items", "dictsort", "sort", "unique", "min", "max", "sum", "map", "select",
        "reject", "selectattr", "rejectattr", "wordcount"};
    if (!kFilters.count(f)) error(line, "unsupported filter \"" + f + "\"");
    auto need_str = [&]() -> const std::string& {
      if (!v.is_string()) error(line, "filter '" + f + "' needs a string, got " + v.type_name());
      return v.str();
    };
    if (f == "default" || f == "d") {
      const Value* b = arg(a, kw, 1, "boolean");
      const bool use = v.is_undefined() || (b && b->truthy() && !v.truthy());
      const Value* dflt = arg(a, kw, 0, "default_value");
      return use ? (dflt ? *dflt : Value(std::string())) : v;
    }
    if (v.is_undefined() && f != "length" && f != "count" && f != "list" && f != "string")
      error(line, "'" + std::get<Undefined>(v.v).name + "' is undefined (filter '" + f + "')");
    if (f == "trim") return Value(py_strip(need_str(), arg(a, kw, 0, "chars"), true, true));
    if (f == "lower") return Value(unicode::to_lower(need_str()));
    if (f == "upper") return Value(upper(need_str()));
    if (f == "title") return Value(title_case(need_str(), false));
    if (f == "capitalize") return Value(title_case(need_str(), true));
    if (f == "length" || f == "count") return Value(py_len(v, line));
    if (f == "string") return Value(v.to_string());
    if (f == "safe" || f == "escape" || f == "e") {
      if (f == "safe") return v;
      std::string s = v.to_string(), out;
      meter_.string_size(s.size());
      for (char c : s) {
        if (out.size() > meter_.budget().max_string) meter_.string_size(out.size());
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out += c;
        }
      }
      return Value(out);
    }
    if (f == "first" || f == "last") {
      List l = iterate(v, line);
      if (l.empty()) return Value::undefined(f);
      return f == "first" ? l.front() : l.back();
    }
    if (f == "list") return Value(iterate(v, line));
    if (f == "reverse") {
      if (v.is_string()) {
        List l = iterate(v, line);
        std::string s;
        for (auto it = l.rbegin(); it != l.rend(); ++it) s += it->str();
        return Value(s);
      }
      List l = iterate(v, line);
      std::reverse(l.begin(), l.end());
      return Value(std::move(l));
    }
    if (f == "join") {
      const Value* sep = arg(a, kw, 0, "d");
      const Value* attr = arg(a, kw, 1, "attribute");
      std::string out;
      List l = iterate(v, line);
      for (size_t i = 0; i < l.size(); ++i) {
        if (i && sep) out += sep->to_string();
        out += (attr ? get_attr(l[i], attr->to_string(), line) : l[i]).to_string();
        meter_.string_size(out.size());
      }
      return Value(std::move(out));
    }
    if (f == "tojson") {
      const Value* ind = arg(a, kw, 0, "indent");
      const Value* sk = arg(a, kw, 1, "sort_keys");
      int indent = -1;
      if (ind && !ind->is_none()) {
        const int64_t i = ind->integer();
        meter_.string_size(size_t(std::max<int64_t>(i, 0)));
        indent = int(std::max<int64_t>(i, 0));  // Python: a negative indent is 0
      }
      return Value(to_json(v, indent, sk && sk->truthy()));
    }
    if (f == "int") {
      // Jinja's do_int: int(x), else int(float(x)), else the default; a
      // value outside int64 (or inf) is an error, as Python's OverflowError.
      const Value* d = arg(a, kw, 0, "default");
      const Value dflt = d ? *d : Value(int64_t(0));
      if (v.is_string()) {
        const std::string t(utf8::rstrip(utf8::lstrip(v.str())));
        int64_t i = 0;
        const char* end = t.data() + t.size();
        const char* b = t.data() + (t.starts_with('+') ? 1 : 0);
        if (auto [p, ec] = std::from_chars(b, end, i); p == end && b != end) {
          if (ec == std::errc()) return Value(i);
          if (ec == std::errc::result_out_of_range) error(line, "integer overflow: " + t + " does not fit in 64 bits");
        }
        char* stop = nullptr;
        const double x = std::strtod(t.c_str(), &stop);
        if (t.empty() || stop != t.c_str() + t.size() || std::isnan(x) || t.find_first_of("xX") != std::string::npos)
          return dflt;
        return Value(float_to_int(x));
      }
      if (v.is_float() && std::isnan(v.number())) return dflt;  // int(nan) is a ValueError: the default
      return v.is_number() || v.is_bool() ? Value(v.integer()) : dflt;
    }
    if (f == "float") {
      if (v.is_string()) {
        try {
          return Value(std::stod(v.str()));
        } catch (...) {
          return Value(0.0);
        }
      }
      return Value(v.is_number() || v.is_bool() ? v.number() : 0.0);
    }
    if (f == "abs") {
      if (v.is_float()) return Value(std::fabs(v.number()));
      if (v.integer() == std::numeric_limits<int64_t>::min()) int_overflow(line, 0, "-", v.integer());
      return Value(int64_t(std::llabs(v.integer())));
    }
    if (f == "round") {
      const Value* p = arg(a, kw, 0, "precision");
      const double m = std::pow(10.0, p ? double(p->integer()) : 0.0);
      return Value(std::round(v.number() * m) / m);
    }
    if (f == "replace") {
      if (a.size() < 2) error(line, "filter 'replace' needs two arguments");
      return Value(replace_str(v.to_string(), a[0].to_string(), a[1].to_string(), a.size() > 2 ? a[2].integer() : -1));
    }
    if (f == "indent") {
      const Value* w = arg(a, kw, 0, "width");
      const Value* first = arg(a, kw, 1, "first");
      const Value* blank = arg(a, kw, 2, "blank");
      int64_t width = 4;
      if (w && !w->is_string()) width = std::max<int64_t>(w->integer(), 0);  // ' ' * -1 is ''
      meter_.string_size(size_t(width));
      const std::string pad = w && w->is_string() ? w->str() : std::string(size_t(width), ' ');
      const std::string s = v.to_string();
      std::string out;
      size_t i = 0, ln = 0;
      while (i <= s.size()) {
        size_t j = s.find('\n', i);
        const std::string lineText = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
        const bool indent = (ln > 0 || (first && first->truthy())) && (!lineText.empty() || (blank && blank->truthy()));
        if (indent) out += pad;
        out += lineText;
        meter_.string_size(out.size());
        if (j == std::string::npos) break;
        out += '\n';
        i = j + 1;
        ++ln;
      }
      return Value(out);
    }
    if (f == "items") return method(v, "items", line).is_callable() ? call0(method(v, "items", line)) : Value(List{});
    if (f == "dictsort") {
      if (!v.is_dict()) error(line, "filter 'dictsort' needs a dict");
      auto items = v.dict().items;
      std::stable_sort(items.begin(), items.end(), [](auto& x, auto& y) { return x.first < y.first; });
      List l;
      for (auto& [k, x] : items) l.push_back(Value(List{Value(k), x}));
      return Value(std::move(l));
    }
    if (f == "sort" || f == "unique" || f == "min" || f == "max" || f == "sum") {
      List l = iterate(v, line);
      const Value* attr = arg(a, kw, f == "sort" ? 2 : f == "sum" ? 0 : 1, "attribute");
      auto key = [&](const Value& x) { return attr ? get_attr(x, attr->to_string(), line) : x; };
      if (f == "sum") {
        Value acc(int64_t(0));
        for (auto& x : l) {
          Value k = key(x);
          int64_t r;
          if (acc.is_float() || k.is_float())
            acc = Value(acc.number() + k.number());
          else if (__builtin_add_overflow(acc.integer(), k.integer(), &r))
            int_overflow(line, acc.integer(), "+", k.integer());
          else
            acc = Value(r);
        }
        return acc;
      }
      if (f == "unique") {
        List out;
        for (auto& x : l)
          if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(key(x), key(y)); }))
            out.push_back(x);
        return Value(std::move(out));
      }
      std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
      if (f == "min") return l.empty() ? Value::undefined("min") : l.front();
      if (f == "max") return l.empty() ? Value::undefined("max") : l.back();
      const Value* rev = arg(a, kw, 0, "reverse");
      if (rev && rev->truthy()) std::reverse(l.begin(), l.end());
      return Value(std::move(l));
    }
    if (f == "map") {
      List l = iterate(v, line), out;
      const Value* attr = arg(a, kw, SIZE_MAX, "attribute");  // keyword only
      for (auto& x : l) {
        if (attr) {
          out.push_back(get_attr(x, attr->to_string(), line));
        } else {
          if (a.empty() || !a[0].is_string()) error(line, "filter 'map' needs a filter name or attribute=");
          std::vector<Value> rest(a.begin() + 1, a.end());
          Kwargs none;
          out.push_back(apply_filter(a[0].str(), x, rest, none, line));
        }
      }
      return Value(std::move(out));
    }
    if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr") {
      const bool attr_mode = f.ends_with("attr");
      const bool want = f.starts_with("select");
      List l = iterate(v, line), out;
      for (auto& x : l) {
        size_t k = 0;
        Value subject = x;
        if (attr_mode) {
          if (a.empty()) error(line, "filter '" + f + "' needs an attribute name");
          subject = get_attr(x, a[0].to_string(), line);
          k = 1;
        }
        bool r;
        if (k < a.size()) {
          std::vector<Value> targs(a.begin() + std::ptrdiff_t(k) + 1, a.end());
          r = apply_test(a[k].to_string(), subject, targs, line);
        } else {
          r = subject.truthy();
        }
        if (r == want) out.push_back(x);
      }
      return Value(std::move(out));
    }
    if (f == "wordcount") return Value(int64_t(py_split(v.to_string(), nullptr, -1).size()));
    error(line, "unsupported filter \"" + f + "\"");
  }

  Value call0(const Value& f) {
    std::vector<Value> a;
    Kwargs kw;
    return (*std::get<std::shared_ptr<Function>>(f.v))(a, kw);
  }

  bool test(const Expr& e) {
    if (e.name == "defined" || e.name == "undefined") {
      const bool def = !eval(*e.a).is_undefined();
      return e.name == "defined" ? def : !def;
    }
    Value v = eval(*e.a);
    std::vector<Value> a;
    for (const auto& x : e.args) a.push_back(eval(*x));
    return apply_test(e.name, v, a, e.line);
  }

  bool apply_test(const std::string& t, const Value& v, std::vector<Value>& a, int line) {
    if (t == "defined") return !v.is_undefined();
    if (t == "undefined") return v.is_undefined();
    if (t == "none") return v.is_none();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_int();
    if (t == "float") return v.is_float();
    if (t == "boolean") return v.is_bool();
    if (t == "true") return v.is_bool() && std::get<bool>(v.v);
    if (t == "false") return v.is_bool() && !std::get<bool>(v.v);
    if (t == "mapping") return v.is_dict();
    if (t == "iterable") return v.is_list() || v.is_dict() || v.is_string();
    if (t == "sequence") return v.is_list() || v.is_string() || v.is_dict();
    if (t == "callable") return v.is_callable();
    if (t == "lower") return v.is_string() && unicode::to_lower(v.str()) == v.str();
    if (t == "upper") return v.is_string() && upper(v.str()) == v.str();
    if (t == "odd" || t == "even") {
      if (!v.is_int()) error(line, "test '" + t + "' needs an integer");
      return (v.integer() % 2 != 0) == (t == "odd");
    }
    if (a.empty()) error(line, "unsupported test \"" + t + "\" (or missing argument)");
    if (t == "divisibleby") {
      const int64_t d = a[0].integer();
      return d != 0 && (d == -1 || v.integer() % d == 0);  // % -1 is UB for the smallest int
    }
    if (t == "eq" || t == "equalto" || t == "==" || t == "sameas") return equal(v, a[0]);
    if (t == "ne" || t == "!=") return !equal(v, a[0]);
    if (t == "lt" || t == "lessthan") return less(v, a[0]);
    if (t == "gt" || t == "greaterthan") return less(a[0], v);
    if (t == "le") return !less(a[0], v);
    if (t == "ge") return !less(v, a[0]);
    if (t == "in") return contains(a[0], v, line);
    error(line, "unsupported test \"" + t + "\"");
  }

  void add_builtins() {
    Scope& g = scopes_.front();
    auto def = [&](const char* name, Function f) {
      if (!g.count(name)) g[name] = Value(std::move(f));
    };
    def("range", [](std::vector<Value>& a, Kwargs&) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.size() == 1) stop = a[0].integer();
      if (a.size() >= 2) start = a[0].integer(), stop = a[1].integer();
      if (a.size() >= 3) step = a[2].integer();
      RINFER_CHECK(step != 0, "chat template: range() step must not be zero");
      // Counted first: range(10**12) is refused before it is built, and
      // the walk never steps past int64.
      const uint64_t n = walk_count(start, stop, step);
      meter().items(n > uint64_t(SIZE_MAX) ? SIZE_MAX : size_t(n));
      meter().step(int64_t(n));
      List l;
      l.reserve(size_t(n));
      for (uint64_t k = 0; k < n; ++k) l.emplace_back(walk_at(start, k, step));
      return Value(std::move(l));
    });
    def("namespace", [](std::vector<Value>& a, Kwargs& kw) {
      Dict d;
      if (!a.empty() && a[0].is_dict()) d = a[0].dict();
      for (auto& [k, v] : kw) d.set(k, v);
      Value ns(std::move(d));
      ns.is_namespace = true;
      return ns;
    });
    def("dict", [](std::vector<Value>& a, Kwargs& kw) {
      Dict d;
      if (!a.empty() && a[0].is_dict()) d = a[0].dict();
      for (auto& [k, v] : kw) d.set(k, v);
      return Value(std::move(d));
    });
    def("raise_exception", [](std::vector<Value>& a, Kwargs&) -> Value {
      fail("chat template: raise_exception: ", a.empty() ? std::string() : a[0].to_string());
    });
    def("strftime_now", [](std::vector<Value>& a, Kwargs&) {
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, a.empty() ? "%Y-%m-%d" : a[0].to_string().c_str(), &tm);
      return Value(std::string(buf, n));
    });
  }

  Meter meter_;
  Meter::Use use_;  // meter_ is this thread's current one while rendering
  int depth_ = 0;   // Nest
  std::vector<Scope> scopes_;
  Mutated mutated_;
};

}  // namespace

Template::Template(const std::string& source, const Budget& budget)
    : budget_(budget), body_(parse_template(source, budget)) {}

std::string Template::render(const Dict& globals) const {
  try {
    Interpreter in(globals, budget_);
    std::string out;
    in.exec(body_, out);
    return out;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail("chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    // A value of the wrong type reaching a builtin (std::get), and the like.
    fail("chat template: ", e.what());
  }
}

}  // namespace rinfer::jinja

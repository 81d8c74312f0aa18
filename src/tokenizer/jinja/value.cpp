#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "core/error.h"

namespace rinfer::jinja {

static_assert(std::is_same_v<std::variant_alternative_t<6, decltype(Value::v)>, std::shared_ptr<List>>);
static_assert(std::is_same_v<std::variant_alternative_t<7, decltype(Value::v)>, std::shared_ptr<Dict>>);

// --- the budget's meter ---------------------------------------------------

namespace {
thread_local Meter* g_meter = nullptr;
}

Meter* Meter::current() { return g_meter; }
Meter::Use::Use(Meter* m) : prev_(g_meter) { g_meter = m; }
Meter::Use::~Use() { g_meter = prev_; }

void Meter::exceeded(const std::string& what) const {
  if (line_ > 0) fail("chat template: line ", line_, ": ", what);
  fail("chat template: ", what);
}

namespace {

// A one-line template error at the line being evaluated.
[[noreturn]] void value_error(const std::string& what) {
  const Meter* m = Meter::current();
  if (m) m->exceeded(what);
  fail("chat template: ", what);
}

// The current render's meter, or a fresh default one outside a render.
class MeterRef {
 public:
  MeterRef() : m_(Meter::current()) {
    if (!m_) m_ = &own_.emplace(Budget{});
  }
  Meter& operator*() const { return *m_; }
  Meter* operator->() const { return m_; }

 private:
  std::optional<Meter> own_;
  Meter* m_;
};

// Containers whose last owner is being destroyed hand their container
// items here instead of destroying them recursively.
thread_local std::vector<Value>* g_released = nullptr;

}  // namespace

void Value::release() noexcept {
  List* l = nullptr;
  Dict* d = nullptr;
  if (auto* p = std::get_if<std::shared_ptr<List>>(&v); p && *p && p->use_count() == 1) l = p->get();
  if (auto* p = std::get_if<std::shared_ptr<Dict>>(&v); p && *p && p->use_count() == 1) d = p->get();
  if (!l && !d) return;
  std::vector<Value> local;
  std::vector<Value>& sink = g_released ? *g_released : local;
  auto take = [&](Value& x) {
    if (x.is_list() || x.is_dict()) sink.push_back(std::move(x));
  };
  if (l)
    for (auto& x : *l) take(x);
  if (d)
    for (auto& kv : d->items) take(kv.second);
  if (&sink != &local) return;  // an outer release() drains it
  g_released = &local;
  while (!local.empty()) {
    Value x = std::move(local.back());
    local.pop_back();
  }  // x's containers went to `local`
  g_released = nullptr;
}

int64_t float_to_int(double d) {
  if (std::isnan(d)) value_error("cannot convert float NaN to integer");
  if (std::isinf(d)) value_error("cannot convert float infinity to integer");
  // [-2^63, 2^63): both bounds are exact doubles.
  if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    value_error(std::string("integer overflow: ") + buf + " does not fit in 64 bits");
  }
  return int64_t(d);
}

double Value::number_slow() const {
  if (is_bool()) return std::get<bool>(v) ? 1.0 : 0.0;
  value_error(std::string("expected a number, got ") + type_name());
}

int64_t Value::integer_slow() const {
  if (is_bool()) return std::get<bool>(v) ? 1 : 0;
  if (is_float()) return float_to_int(std::get<double>(v));
  value_error(std::string("expected an integer, got ") + type_name());
}


const Value* Dict::find(const std::string& k) const {
  for (const auto& [key, val] : items)
    if (key == k) return &val;
  return nullptr;
}

Value* Dict::find(const std::string& k) {
  for (auto& [key, val] : items)
    if (key == k) return &val;
  return nullptr;
}

void Dict::set(const std::string& k, Value v) {
  if (Value* old = find(k))
    *old = std::move(v);
  else
    items.emplace_back(k, std::move(v));
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return std::get<bool>(v);
  if (is_int()) return std::get<int64_t>(v) != 0;
  if (is_float()) return std::get<double>(v) != 0.0;
  if (is_string()) return !str().empty();
  if (is_list()) return !list().empty();
  if (is_dict()) return !dict().items.empty();
  return true;
}

namespace {

// Python's repr of a float: the shortest round-trip digits, with ".0" for
// integral values and exponent form outside [1e-4, 1e16).
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, p);
  const double a = std::fabs(d);
  if (a != 0 && (a >= 1e16 || a < 1e-4)) {
    auto [q, ec2] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    s.assign(buf, q);
    // Python writes e+16 / e-05 (at least two exponent digits, with sign).
    const size_t e = s.find('e');
    std::string mant = s.substr(0, e), exp = s.substr(e + 1);
    const char sign = exp[0] == '-' ? '-' : '+';
    if (exp[0] == '-' || exp[0] == '+') exp.erase(0, 1);
    if (exp.size() < 2) exp.insert(0, "0");
    return mant + "e" + sign + exp;
  }
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string string_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == q) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned char>(c));
          out += b;
        } else {
          out += c;
        }
    }
  }
  return out + q;
}

}  // namespace

std::string Value::to_string() const {
  if (is_undefined()) return "";
  if (is_string()) return str();
  return repr();
}

namespace {

// Appends repr(v), charging the budget: a step per value, the nesting, and
// the length of the text as it grows.
void repr_into(const Value& v, Meter& m, int depth, std::string& out) {
  m.step();
  if (v.is_list()) {
    m.nesting(depth + 1);
    out += '[';
    for (size_t i = 0; i < v.list().size(); ++i) {
      if (i) out += ", ";
      repr_into(v.list()[i], m, depth + 1, out);
    }
    out += ']';
  } else if (v.is_dict() && !v.is_namespace) {
    m.nesting(depth + 1);
    out += '{';
    bool first = true;
    for (const auto& [k, val] : v.dict().items) {
      if (!first) out += ", ";
      out += string_repr(k);
      out += ": ";
      repr_into(val, m, depth + 1, out);
      first = false;
    }
    out += '}';
  } else if (v.is_undefined()) {
  } else if (v.is_none()) {
    out += "None";
  } else if (v.is_bool()) {
    out += std::get<bool>(v.v) ? "True" : "False";
  } else if (v.is_int()) {
    out += std::to_string(std::get<int64_t>(v.v));
  } else if (v.is_float()) {
    out += float_repr(std::get<double>(v.v));
  } else if (v.is_string()) {
    out += string_repr(v.str());
  } else {
    out += v.is_dict() ? "<Namespace>" : "<function>";
  }
  m.string_size(out.size());
}

}  // namespace

std::string Value::repr() const {
  MeterRef m;
  std::string out;
  repr_into(*this, *m, 0, out);
  return out;
}

const char* Value::type_name() const {
  if (is_undefined()) return "undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_list()) return "list";
  if (is_dict()) return "dict";
  return "function";
}

namespace {

bool equal_at(const Value& a, const Value& b, Meter& m, int depth) {
  m.step();
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) return a.number() == b.number();
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_none() && b.is_none()) return true;
  if (a.is_undefined() && b.is_undefined()) return true;
  if (a.is_list() && b.is_list()) {
    if (&a.list() == &b.list()) return true;
    if (a.list().size() != b.list().size()) return false;
    m.nesting(depth + 1);
    for (size_t i = 0; i < a.list().size(); ++i)
      if (!equal_at(a.list()[i], b.list()[i], m, depth + 1)) return false;
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    if (&a.dict() == &b.dict()) return true;
    if (a.dict().items.size() != b.dict().items.size()) return false;
    m.nesting(depth + 1);
    for (const auto& [k, v] : a.dict().items) {
      m.step();
      const Value* o = b.dict().find(k);
      if (!o || !equal_at(v, *o, m, depth + 1)) return false;
    }
    return true;
  }
  return false;
}

bool less_at(const Value& a, const Value& b, Meter& m, int depth) {
  m.step();
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) return a.number() < b.number();
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.list(), &y = b.list();
    m.nesting(depth + 1);
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less_at(x[i], y[i], m, depth + 1)) return true;
      if (less_at(y[i], x[i], m, depth + 1)) return false;
    }
    return x.size() < y.size();
  }
  value_error(std::string("'<' not supported between ") + a.type_name() + " and " + b.type_name());
}

}  // namespace

bool equal(const Value& a, const Value& b) {
  MeterRef m;
  return equal_at(a, b, *m, 0);
}

bool less(const Value& a, const Value& b) {
  MeterRef m;
  return less_at(a, b, *m, 0);
}

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (j.is_null()) return Value(None{});
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer()) return Value(j.get<int64_t>());
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (depth >= Budget{}.max_nesting) fail("chat template: JSON input nested deeper than ", Budget{}.max_nesting);
  if (j.is_array()) {
    List l;
    for (const auto& e : j) l.push_back(from_json_at(e, depth + 1));
    return Value(std::move(l));
  }
  Dict d;
  for (const auto& [k, v] : j.items()) d.items.emplace_back(k, from_json_at(v, depth + 1));
  return Value(std::move(d));
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

namespace {

void json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned char>(c));
          *out += b;
        } else {
          *out += c;  // ensure_ascii=False: UTF-8 as is
        }
    }
  }
  *out += '"';
}

void dump(const Value& v, int indent, bool sort_keys, int depth, Meter& m, std::string* out) {
  m.step();
  m.string_size(out->size());
  auto newline = [&](int d) {
    if (indent < 0) return;
    *out += '\n';
    m.string_size(out->size() + size_t(indent) * size_t(d));
    out->append(size_t(indent) * size_t(d), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  if (v.is_undefined() || v.is_none()) {
    *out += "null";
  } else if (v.is_bool()) {
    *out += std::get<bool>(v.v) ? "true" : "false";
  } else if (v.is_int()) {
    *out += std::to_string(std::get<int64_t>(v.v));
  } else if (v.is_float()) {
    const double d = std::get<double>(v.v);
    *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : v.repr();
  } else if (v.is_string()) {
    json_string(v.str(), out);
  } else if (v.is_list()) {
    if (v.list().empty()) {
      *out += "[]";
      return;
    }
    m.nesting(depth + 1);
    *out += '[';
    for (size_t i = 0; i < v.list().size(); ++i) {
      if (i) *out += item_sep;
      newline(depth + 1);
      dump(v.list()[i], indent, sort_keys, depth + 1, m, out);
    }
    newline(depth);
    *out += ']';
  } else if (v.is_dict()) {
    auto items = v.dict().items;
    if (items.empty()) {
      *out += "{}";
      return;
    }
    m.nesting(depth + 1);
    if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto& a, auto& b) { return a.first < b.first; });
    *out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) *out += item_sep;
      newline(depth + 1);
      json_string(items[i].first, out);
      *out += ": ";
      dump(items[i].second, indent, sort_keys, depth + 1, m, out);
    }
    newline(depth);
    *out += '}';
  } else {
    value_error("tojson: a function is not JSON serializable");
  }
  m.string_size(out->size());
}

}  // namespace

std::string to_json(const Value& v, int indent, bool sort_keys) {
  MeterRef m;
  if (indent > 0) m->string_size(size_t(indent));
  std::string out;
  dump(v, indent, sort_keys, 0, *m, &out);
  return out;
}

}  // namespace rinfer::jinja

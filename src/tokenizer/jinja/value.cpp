#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace rinfer::jinja {

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

std::string Value::repr() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return std::get<bool>(v) ? "True" : "False";
  if (is_int()) return std::to_string(std::get<int64_t>(v));
  if (is_float()) return float_repr(std::get<double>(v));
  if (is_string()) return string_repr(str());
  if (is_list()) {
    std::string s = "[";
    for (size_t i = 0; i < list().size(); ++i) s += (i ? ", " : "") + list()[i].repr();
    return s + "]";
  }
  if (is_dict()) {
    if (is_namespace) return "<Namespace>";
    std::string s = "{";
    bool first = true;
    for (const auto& [k, val] : dict().items) {
      s += (first ? "" : ", ") + string_repr(k) + ": " + val.repr();
      first = false;
    }
    return s + "}";
  }
  return "<function>";
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

bool equal(const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) return a.number() == b.number();
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_none() && b.is_none()) return true;
  if (a.is_undefined() && b.is_undefined()) return true;
  if (a.is_list() && b.is_list()) {
    if (a.list().size() != b.list().size()) return false;
    for (size_t i = 0; i < a.list().size(); ++i)
      if (!equal(a.list()[i], b.list()[i])) return false;
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    if (a.dict().items.size() != b.dict().items.size()) return false;
    for (const auto& [k, v] : a.dict().items) {
      const Value* o = b.dict().find(k);
      if (!o || !equal(v, *o)) return false;
    }
    return true;
  }
  return false;
}

bool less(const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) return a.number() < b.number();
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(x[i], y[i])) return true;
      if (less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  fail("chat template: '<' not supported between ", a.type_name(), " and ", b.type_name());
}

Value from_json(const nlohmann::ordered_json& j) {
  if (j.is_null()) return Value(None{});
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer()) return Value(j.get<int64_t>());
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (j.is_array()) {
    List l;
    for (const auto& e : j) l.push_back(from_json(e));
    return Value(std::move(l));
  }
  Dict d;
  for (const auto& [k, v] : j.items()) d.items.emplace_back(k, from_json(v));
  return Value(std::move(d));
}

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

void dump(const Value& v, int indent, bool sort_keys, int depth, std::string* out) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    *out += '\n';
    out->append(size_t(indent * d), ' ');
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
    *out += '[';
    for (size_t i = 0; i < v.list().size(); ++i) {
      if (i) *out += item_sep;
      newline(depth + 1);
      dump(v.list()[i], indent, sort_keys, depth + 1, out);
    }
    newline(depth);
    *out += ']';
  } else if (v.is_dict()) {
    auto items = v.dict().items;
    if (items.empty()) {
      *out += "{}";
      return;
    }
    if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto& a, auto& b) { return a.first < b.first; });
    *out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) *out += item_sep;
      newline(depth + 1);
      json_string(items[i].first, out);
      *out += ": ";
      dump(items[i].second, indent, sort_keys, depth + 1, out);
    }
    newline(depth);
    *out += '}';
  } else {
    fail("chat template: tojson: a function is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  dump(v, indent, sort_keys, 0, &out);
  return out;
}

}  // namespace rinfer::jinja

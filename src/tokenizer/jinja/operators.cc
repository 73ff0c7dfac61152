#include <fmt/format.h>

#include <cmath>

#include "tokenizer/jinja/builtins.h"

namespace vellum::jinja {
namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  throw RenderError(fmt::format("unsupported operand types for {}: '{}' and '{}'", op,
                                a.type_name(), b.type_name()));
}

void check_overflow(bool overflow, std::string_view op) {
  if (overflow) throw RenderError(fmt::format("integer overflow in '{}'", op));
}

// Python floor division and modulo: the remainder takes the sign of the divisor.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value repeat(const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value(std::string()) : Value::array({});
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (s.size() * static_cast<size_t>(times) > kMaxStringBytes) {
      throw RenderError("string repetition result is larger than 64 MiB");
    }
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value(std::move(out));
  }
  const Array& items = seq.as_array();
  if (items.size() * static_cast<size_t>(times) > kMaxRangeLength) {
    throw RenderError("list repetition result has more than 1048576 items");
  }
  Array out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::array(std::move(out));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw RenderError(fmt::format("'in <string>' requires a string as left operand, not '{}'",
                                      item.type_name()));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kArray:
      for (const Value& v : container.as_array()) {
        if (v.equals(item)) return true;
      }
      return false;
    case Value::Kind::kObject:
      return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
    case Value::Kind::kUndefined: return false;
    default:
      throw RenderError(
          fmt::format("argument of type '{}' is not iterable", container.type_name()));
  }
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  const bool ints = a.is_int() && b.is_int();
  if (op == "/") {
    if (b.as_double() == 0.0) throw RenderError("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0.0) throw RenderError(op == "//" ? "integer division by zero" : "modulo by zero");
    if (ints) {
      if (a.as_int() == INT64_MIN && b.as_int() == -1) throw RenderError("integer overflow");
      const int64_t q = floor_div(a.as_int(), b.as_int());
      return op == "//" ? Value(q) : Value(a.as_int() - q * b.as_int());
    }
    const double q = std::floor(a.as_double() / b.as_double());
    return op == "//" ? Value(q) : Value(a.as_double() - q * b.as_double());
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      const int64_t base = a.as_int();
      const int64_t exponent = b.as_int();
      if (base == 0) return Value(int64_t{exponent == 0 ? 1 : 0});
      if (base == 1) return Value(int64_t{1});
      if (base == -1) return Value(int64_t{exponent % 2 == 0 ? 1 : -1});
      int64_t result = 1;  // |base| >= 2: overflows within 63 multiplications
      for (int64_t i = 0; i < exponent; ++i) check_overflow(__builtin_mul_overflow(result, base, &result), op);
      return Value(result);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  if (ints) {
    int64_t r = 0;
    if (op == "+") {
      check_overflow(__builtin_add_overflow(a.as_int(), b.as_int(), &r), op);
    } else if (op == "-") {
      check_overflow(__builtin_sub_overflow(a.as_int(), b.as_int(), &r), op);
    } else {
      check_overflow(__builtin_mul_overflow(a.as_int(), b.as_int(), &r), op);
    }
    return Value(r);
  }
  if (op == "+") return Value(a.as_double() + b.as_double());
  if (op == "-") return Value(a.as_double() - b.as_double());
  return Value(a.as_double() * b.as_double());
}

}  // namespace

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_array() && b.is_array()) {
    const Array& x = a.as_array();
    const Array& y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].equals(y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw RenderError(fmt::format("'<' not supported between '{}' and '{}'", a.type_name(),
                                b.type_name()));
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string out = a.to_output();
    out += b.to_output();
    if (out.size() > kMaxStringBytes) throw RenderError("string is larger than 64 MiB");
    return Value(std::move(out));
  }
  if (op == "==") return Value(a.equals(b));
  if (op == "!=") return Value(!a.equals(b));
  if (op == "<") return Value(less_than(a, b));
  if (op == ">") return Value(less_than(b, a));
  if (op == "<=") return Value(!less_than(b, a));
  if (op == ">=") return Value(!less_than(a, b));
  if (op == "in") return Value(contains(b, a));
  if (op == "not in") return Value(!contains(b, a));
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > kMaxStringBytes) {
        throw RenderError("string is larger than 64 MiB");
      }
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_array() && b.is_array()) {
      Array out = a.as_array();
      out.insert(out.end(), b.as_array().begin(), b.as_array().end());
      return Value::array(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_array()) && b.is_int()) return repeat(a, b.as_int());
    if (a.is_int() && (b.is_string() || b.is_array())) return repeat(b, a.as_int());
  }
  return arithmetic(op, a, b);
}

Value unary_op(std::string_view op, const Value& v) {
  if (op == "not") return Value(!v.truthy());
  if (!v.is_number()) {
    throw RenderError(fmt::format("bad operand type for unary {}: '{}'", op, v.type_name()));
  }
  if (op == "+") return v.is_int() ? Value(v.as_int()) : v;
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) throw RenderError("integer overflow in unary '-'");
    return Value(-v.as_int());
  }
  return Value(-v.as_double());
}

Value get_attribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      throw RenderError(fmt::format("cannot read attribute '{}' of an undefined value ({})", name,
                                    object.as_string().empty() ? "undefined" : object.as_string()));
    case Value::Kind::kObject: {
      if (name == "items" || name == "keys" || name == "values" || name == "get") {
        return bound_method(object, name);  // Jinja tries Python attributes first
      }
      const Value* found = object.as_object().find(name);
      return found != nullptr ? *found : Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
    }
    case Value::Kind::kNamespace: {
      const Value* found = object.as_object().find(name);
      return found != nullptr ? *found : Value::undefined(fmt::format("'namespace' has no attribute '{}'", name));
    }
    case Value::Kind::kString:
    case Value::Kind::kArray: {
      Value method = bound_method(object, name);
      if (!method.is_undefined()) return method;
      break;
    }
    default: break;
  }
  return Value::undefined(fmt::format("'{}' object has no attribute '{}'", object.type_name(), name));
}

Value get_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      throw RenderError(fmt::format("cannot index an undefined value with {} ({})", key.repr(),
                                    object.as_string().empty() ? "undefined" : object.as_string()));
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: {
      if (!key.is_string()) break;
      const Value* found = object.as_object().find(key.as_string());
      if (found != nullptr) return *found;
      return Value::undefined(fmt::format("'dict object' has no element {}", key.repr()));
    }
    case Value::Kind::kArray:
    case Value::Kind::kString: {
      if (!key.is_int()) {
        if (key.is_string()) return get_attribute(object, key.as_string());
        throw RenderError(fmt::format("{} indices must be integers, not '{}'", object.type_name(),
                                      key.type_name()));
      }
      const bool is_string = object.is_string();
      std::vector<size_t> offsets;
      if (is_string) offsets = utf8_offsets(object.as_string());
      const auto size = static_cast<int64_t>(is_string ? offsets.size() - 1 : object.as_array().size());
      int64_t index = key.as_int();
      if (index < 0) index += size;
      if (index < 0 || index >= size) {
        return Value::undefined(fmt::format("{} index {} out of range", object.type_name(), key.as_int()));
      }
      const auto i = static_cast<size_t>(index);
      if (!is_string) return object.as_array()[i];
      return Value(object.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
    default: break;
  }
  return Value::undefined(fmt::format("'{}' object has no element {}", object.type_name(), key.repr()));
}

Value slice_value(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (!object.is_string() && !object.is_array()) {
    throw RenderError(fmt::format("'{}' object cannot be sliced", object.type_name()));
  }
  const auto bound = [](const Value& v, std::string_view what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int()) throw RenderError(fmt::format("slice {} must be an integer or none", what));
    return v.as_int();
  };
  const int64_t step = bound(step_v, "step").value_or(1);
  if (step == 0) throw RenderError("slice step cannot be zero");
  const bool is_string = object.is_string();
  std::vector<size_t> offsets;
  if (is_string) offsets = utf8_offsets(object.as_string());
  const auto size = static_cast<int64_t>(is_string ? offsets.size() - 1 : object.as_array().size());
  // Python's slice.indices(): clamp into [0, size] (or [-1, size-1] for negative steps).
  const auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v;
    if (i < 0) i = std::max<int64_t>(i + size, step < 0 ? -1 : 0);
    return std::min<int64_t>(i, step < 0 ? size - 1 : size);
  };
  const int64_t start = clamp(bound(start_v, "start"), step < 0 ? size - 1 : 0);
  const int64_t stop = clamp(bound(stop_v, "stop"), step < 0 ? -1 : size);
  std::string text;
  Array items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    const auto k = static_cast<size_t>(i);
    if (is_string) {
      text.append(object.as_string(), offsets[k], offsets[k + 1] - offsets[k]);
    } else {
      items.push_back(object.as_array()[k]);
    }
  }
  return is_string ? Value(std::move(text)) : Value::array(std::move(items));
}

Array iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kArray: return value.as_array();
    case Value::Kind::kObject: {
      Array keys;
      for (const auto& [key, item] : value.as_object().entries) keys.emplace_back(key);
      return keys;
    }
    case Value::Kind::kString: {
      Array chars;
      const std::string& s = value.as_string();
      const auto offsets = utf8_offsets(s);
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
      return chars;
    }
    default:
      throw RenderError(fmt::format("'{}' object is not iterable", value.type_name()));
  }
}

}  // namespace vellum::jinja

#include "tokenizer/jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace vellum::jinja {

const Value* CallArgs::get(size_t index, std::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.string_ = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::array(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  v.array_ = std::make_shared<const Array>(std::move(items));
  return v;
}

Value Value::tuple(Array items) {
  Value v = array(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::object(Object object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.object_ = std::make_shared<Object>(std::move(object));
  return v;
}

Value Value::make_namespace(Object attributes) {
  Value v = object(std::move(attributes));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::callable(std::string name, std::function<Value(const CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.callable_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

namespace {

template <typename Json>
Value value_from_json(const Json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(static_cast<int64_t>(json.template get<int64_t>()));
    case nlohmann::json::value_t::number_unsigned:
      return Value(static_cast<int64_t>(json.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(json.template get<double>());
    case nlohmann::json::value_t::string: return Value(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      Array items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item));
      return Value::array(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Object object;
      object.entries.reserve(json.size());
      for (auto it = json.begin(); it != json.end(); ++it) {
        object.entries.emplace_back(it.key(), value_from_json(it.value()));
      }
      return Value::object(std::move(object));
    }
    default: return Value::none();  // binary / discarded: not produced by JSON parsing
  }
}

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += ch;  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  out += '"';
}

void append_repr_string(std::string& out, std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  out += quote;
}

void append_json(std::string& out, const Value& value, int indent, bool sort_keys, int depth) {
  if (depth > 256) throw RenderError("tojson: value nested deeper than 256 levels");
  const auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (value.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += value.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(value.as_int()); return;
    case Value::Kind::kFloat: {
      const double f = value.as_double();
      if (std::isnan(f)) out += "NaN";
      else if (std::isinf(f)) out += f > 0 ? "Infinity" : "-Infinity";
      else out += python_float_repr(f);
      return;
    }
    case Value::Kind::kString: append_json_string(out, value.as_string()); return;
    case Value::Kind::kArray: {
      const Array& items = value.as_array();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        append_json(out, items[i], indent, sort_keys, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kObject: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.as_object().entries) entries.push_back(&entry);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys) {
        std::sort(entries.begin(), entries.end(),
                  [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        append_json_string(out, entries[i]->first);
        out += ": ";
        append_json(out, entries[i]->second, indent, sort_keys, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      throw RenderError(fmt::format("tojson: a value of type {} is not JSON serializable",
                                    value.type_name()));
  }
}

void append_repr(std::string& out, const Value& value, int depth) {
  if (depth > 256) throw RenderError("cannot print a value nested deeper than 256 levels");
  switch (value.kind()) {
    case Value::Kind::kString: append_repr_string(out, value.as_string()); return;
    case Value::Kind::kArray: {
      out += value.is_tuple() ? '(' : '[';
      const Array& items = value.as_array();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        append_repr(out, items[i], depth + 1);
      }
      if (value.is_tuple() && items.size() == 1) out += ',';
      out += value.is_tuple() ? ')' : ']';
      return;
    }
    case Value::Kind::kObject: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.as_object().entries) {
        if (!first) out += ", ";
        first = false;
        append_repr_string(out, key);
        out += ": ";
        append_repr(out, item, depth + 1);
      }
      out += '}';
      return;
    }
    default: out += value.to_output(); return;
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& json) { return value_from_json(json); }
Value Value::from_json(const nlohmann::ordered_json& json) { return value_from_json(json); }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0.0;
    case Kind::kString: return !string_.empty();
    case Kind::kArray: return !array_->empty();
    case Kind::kObject: return !object_->entries.empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::kFloat || other.kind_ == Kind::kFloat) {
      return as_double() == other.as_double();
    }
    return int_ == other.int_;
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return string_ == other.string_;
    case Kind::kArray: {
      const Array& a = *array_;
      const Array& b = *other.array_;
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].equals(b[i])) return false;
      }
      return true;
    }
    case Kind::kObject: {
      const Object& a = *object_;
      const Object& b = *other.object_;
      if (a.entries.size() != b.entries.size()) return false;
      for (const auto& [key, item] : a.entries) {
        const Value* match = b.find(key);
        if (match == nullptr || !item.equals(*match)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return object_ == other.object_;
    case Kind::kCallable: return callable_ == other.callable_;
    default: return false;
  }
}

std::string Value::to_output() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return int_ != 0 ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return python_float_repr(float_);
    case Kind::kString: return string_;
    case Kind::kArray:
    case Kind::kObject: return repr();
    case Kind::kNamespace: return "<Namespace>";
    case Kind::kCallable: return fmt::format("<function {}>", callable_->name);
  }
  return "";
}

std::string Value::repr() const {
  std::string out;
  append_repr(out, *this, 0);
  return out;
}

std::string Value::to_json_text(int indent, bool sort_keys) const {
  std::string out;
  append_json(out, *this, indent, sort_keys, 0);
  return out;
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kArray: return "list";
    case Kind::kObject: return "dict";
    case Kind::kNamespace: return "namespace";
    case Kind::kCallable: return "function";
  }
  return "unknown";
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<size_t>(result.ptr - buffer));  // "-1.2345e+02"
  const bool negative = !sci.empty() && sci[0] == '-';
  if (negative) sci.remove_prefix(1);
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (const char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const auto int_digits = static_cast<size_t>(exponent + 1);
      if (digits.size() <= int_digits) {
        out += digits;
        out.append(int_digits - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_digits);
        out += '.';
        out += digits.substr(int_digits);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

size_t utf8_length(std::string_view text) {
  size_t count = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  }
  return count;
}

std::vector<size_t> utf8_offsets(std::string_view text) {
  std::vector<size_t> offsets;
  offsets.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(text.size());
  return offsets;
}

}  // namespace vellum::jinja

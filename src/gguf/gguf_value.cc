#include "gguf/gguf_value.h"

#include <fmt/format.h>

#include <limits>
#include <type_traits>

namespace vellum::gguf {

const char* value_type_name(ValueType type) {
  static constexpr const char* kNames[kNumValueTypes] = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  const auto id = static_cast<uint32_t>(type);
  return id < kNumValueTypes ? kNames[id] : "unknown";
}

Value::Value(Array array) : storage_(std::make_shared<const Array>(std::move(array))) {}
Value::Value(std::shared_ptr<const Array> array) : storage_(std::move(array)) {}

bool Value::is_integer() const {
  switch (type()) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> Value::as_int() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(v);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<double> Value::as_float() const {
  return std::visit(
      [](const auto& v) -> std::optional<double> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<double>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<bool> Value::as_bool() const {
  if (const bool* b = std::get_if<bool>(&storage_)) return *b;
  return std::nullopt;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&storage_); }

const Array* Value::as_array() const {
  const auto* p = std::get_if<std::shared_ptr<const Array>>(&storage_);
  return p != nullptr ? p->get() : nullptr;
}

namespace {

std::string quote(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string Value::to_string(size_t max_items) const {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return quote(v, 200);
        } else if constexpr (std::is_same_v<T, std::shared_ptr<const Array>>) {
          const Array& a = *v;
          std::string out = fmt::format("[{}; {}]", value_type_name(a.element_type()), a.size());
          if (a.size() == 0) return out;
          out += " [";
          const size_t n = std::min(a.size(), max_items);
          for (size_t i = 0; i < n; ++i) {
            if (i > 0) out += ", ";
            out += a.element(i).to_string(max_items);
          }
          if (n < a.size()) out += ", ...";
          return out + "]";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
          return fmt::format("{}", static_cast<int>(v));
        } else {
          return fmt::format("{}", v);
        }
      },
      storage_);
}

bool Value::operator==(const Value& other) const {
  if (storage_.index() != other.storage_.index()) return false;
  if (is_array()) return *as_array() == *other.as_array();
  return storage_ == other.storage_;
}

size_t Array::size() const {
  return std::visit([](const auto& v) { return v.size(); }, storage_);
}

Value Array::element(size_t i) const {
  return std::visit(
      [i](const auto& v) -> Value {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, Value>) {
          return v.at(i);
        } else if constexpr (std::is_same_v<T, bool>) {
          return Value(static_cast<bool>(v.at(i)));
        } else {
          return Value(v.at(i));
        }
      },
      storage_);
}

}  // namespace vellum::gguf

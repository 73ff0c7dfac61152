// GGUF metadata values: every GGUF value type, including arrays of arrays.
//
// A Value owns its data. Arrays are held through a shared, immutable pointer, so copying a Value
// (for example the 150k-string tokenizer vocabulary from one file into a writer) is O(1).
// Arrays store elements in a typed vector (std::vector<float>, std::vector<std::string>, ...),
// not as a vector of Values, so big numeric and string arrays cost one allocation per string
// at most and can be handed out by reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace vellum::gguf {

// GGUF's value type ids; written to disk.
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
inline constexpr uint32_t kNumValueTypes = 13;

// "u8", "i32", "f32", "bool", "string", "array", ...
const char* value_type_name(ValueType type);

class Array;

class Value {
 public:
  // Alternatives are in ValueType order: variant index == ValueType id.
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, std::shared_ptr<const Array>, uint64_t, int64_t,
                               double>;

  Value() : storage_(uint8_t{0}) {}  // a u8 zero; only so containers can default-construct
  explicit Value(uint8_t v) : storage_(v) {}
  explicit Value(int8_t v) : storage_(v) {}
  explicit Value(uint16_t v) : storage_(v) {}
  explicit Value(int16_t v) : storage_(v) {}
  explicit Value(uint32_t v) : storage_(v) {}
  explicit Value(int32_t v) : storage_(v) {}
  explicit Value(float v) : storage_(v) {}
  explicit Value(bool v) : storage_(v) {}
  explicit Value(std::string v) : storage_(std::move(v)) {}
  explicit Value(const char* v) : storage_(std::string(v)) {}
  explicit Value(Array array);
  explicit Value(std::shared_ptr<const Array> array);
  explicit Value(uint64_t v) : storage_(v) {}
  explicit Value(int64_t v) : storage_(v) {}
  explicit Value(double v) : storage_(v) {}

  ValueType type() const { return static_cast<ValueType>(storage_.index()); }
  bool is_integer() const;  // u8..i64 (not bool)
  bool is_float() const { return type() == ValueType::kF32 || type() == ValueType::kF64; }
  bool is_string() const { return type() == ValueType::kString; }
  bool is_array() const { return type() == ValueType::kArray; }

  // Any integer type as int64; nullopt for other types or a u64 above INT64_MAX.
  std::optional<int64_t> as_int() const;
  // f32, f64 or any integer type as double; nullopt for other types.
  std::optional<double> as_float() const;
  // bool only.
  std::optional<bool> as_bool() const;
  // nullptr unless a string.
  const std::string* as_string() const;
  // nullptr unless an array.
  const Array* as_array() const;

  const Storage& storage() const { return storage_; }

  // For printing: strings quoted, arrays abbreviated to `max_items` elements.
  std::string to_string(size_t max_items = 8) const;

  bool operator==(const Value& other) const;

 private:
  Storage storage_;
};

class Array {
 public:
  // Alternatives are in ValueType order: variant index == element ValueType id. An array of
  // arrays holds one Value (of type kArray) per element.
  using Storage =
      std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                   std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                   std::vector<float>, std::vector<bool>, std::vector<std::string>,
                   std::vector<Value>, std::vector<uint64_t>, std::vector<int64_t>,
                   std::vector<double>>;

  explicit Array(Storage storage) : storage_(std::move(storage)) {}

  ValueType element_type() const { return static_cast<ValueType>(storage_.index()); }
  size_t size() const;

  // The typed elements; nullptr when the element type is different.
  template <typename T>
  const std::vector<T>* get() const {
    return std::get_if<std::vector<T>>(&storage_);
  }
  const std::vector<std::string>* strings() const { return get<std::string>(); }
  const std::vector<Value>* arrays() const { return get<Value>(); }

  // Element i as a Value (copies it; for printing and generic code, not for hot loops).
  Value element(size_t i) const;

  const Storage& storage() const { return storage_; }
  bool operator==(const Array& other) const { return storage_ == other.storage_; }

 private:
  Storage storage_;
};

}  // namespace vellum::gguf

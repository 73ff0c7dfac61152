// Value: the dynamic value type of the Jinja interpreter, with Python semantics where chat
// templates depend on them (truthiness, equality, str()/repr(), json.dumps()).
//
// Arrays and objects are shared by reference (std::shared_ptr) and never mutated after they are
// built, exactly like HF's ImmutableSandboxedEnvironment. The one mutable container is a
// namespace (`namespace(...)`), whose attributes `{% set ns.x = ... %}` changes in place, so a
// namespace can hold itself; the renderer that made it empties it when the render ends.
// Values are created per render; a Value is not safe to mutate from two threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vellum::jinja {

class Value;
using Array = std::vector<Value>;

// An error raised while evaluating, before the interpreter knows the template location; the
// interpreter catches it and rethrows a vellum::Error naming the line and column.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`, or nullptr when neither was given.
  const Value* get(size_t index, std::string_view name) const;
};

// A callable value: a global function (range, namespace, raise_exception…), a macro, a caller.
struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> fn;
};

// Insertion-ordered string-keyed map (Python dicts keep insertion order). Lookup is linear:
// template objects are small (messages, tool schemas).
struct Object {
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kCallable
  };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::kBool), int_(b ? 1 : 0) {}  // NOLINT(google-explicit-constructor)
  Value(int64_t i) : kind_(Kind::kInt), int_(i) {}         // NOLINT
  Value(int i) : kind_(Kind::kInt), int_(i) {}             // NOLINT
  Value(double f) : kind_(Kind::kFloat), float_(f) {}      // NOLINT
  Value(std::string s) : kind_(Kind::kString), string_(std::move(s)) {}  // NOLINT
  Value(std::string_view s) : kind_(Kind::kString), string_(s) {}        // NOLINT
  Value(const char* s) : kind_(Kind::kString), string_(s) {}             // NOLINT

  // `hint` names what was looked up, for "'x' is undefined" messages.
  static Value undefined(std::string hint = {});
  static Value none();
  static Value array(Array items);
  // A Python tuple: a list that prints as (a, b). Made by (a, b) literals, items(), dictsort.
  static Value tuple(Array items);
  static Value object(Object object);
  static Value make_namespace(Object attributes);
  static Value callable(std::string name, std::function<Value(const CallArgs&)> fn);

  static Value from_json(const nlohmann::json& json);
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }  // Python: bool ⊂ int
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_tuple() const { return kind_ == Kind::kArray && tuple_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return string_; }   // also the hint of an undefined
  // In-place append for string values (the interpreter's `a ~ b` / `a + b` on a temporary).
  void append_string(std::string_view text) { string_ += text; }
  const Array& as_array() const { return *array_; }
  const Object& as_object() const { return *object_; }       // object or namespace
  Object& namespace_attributes() const { return *object_; }  // namespaces only
  // A namespace's storage, weakly: the renderer empties the namespaces still alive when a
  // render ends, which breaks the cycles `{% set ns.me = ns %}` can make.
  std::weak_ptr<Object> namespace_handle() const { return object_; }
  const Callable& as_callable() const { return *callable_; }

  // Python truthiness: empty strings/containers, 0, none and undefined are false.
  bool truthy() const;
  // Python ==, with 1 == 1.0 == True; containers compare element-wise.
  bool equals(const Value& other) const;
  // What `{{ value }}` prints: Python str() (True, None, 1.0, ['a', 1]); undefined prints "".
  std::string to_output() const;
  // Python repr(): strings quoted, containers as Python literals.
  std::string repr() const;
  // Python's json.dumps(value, ensure_ascii=False, indent=indent, separators=…) as HF's tojson
  // filter calls it: ", "/": " without indent, ","/": " with indent. indent < 0: no indent.
  std::string to_json_text(int indent, bool sort_keys) const;
  // "string", "int", "list", "dict"… for error messages.
  std::string_view type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;  // kArray only: print as a tuple
  int64_t int_ = 0;
  double float_ = 0.0;
  std::string string_;
  std::shared_ptr<const Array> array_;
  std::shared_ptr<Object> object_;  // const for kObject by convention; mutable for kNamespace
  std::shared_ptr<const Callable> callable_;
};

// Python float repr(): shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string python_float_repr(double value);

// UTF-8 helpers: Python indexes strings by code point, so slicing and length must too.
size_t utf8_length(std::string_view text);
// Byte offsets of every code point start, plus text.size() at the end.
std::vector<size_t> utf8_offsets(std::string_view text);

}  // namespace vellum::jinja

// Operators, filters, tests and methods of the Jinja subset, with Python semantics. Internal to
// the interpreter. Each throws RenderError (no location) on a type error; the interpreter adds
// the template line and column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/jinja/value.h"

namespace vellum::jinja {

// Raised by the template's own raise_exception(message).
class RaisedError : public RenderError {
 public:
  using RenderError::RenderError;
};

// Limits that keep a malformed or hostile template from exhausting memory.
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;
inline constexpr size_t kMaxRangeLength = size_t{1} << 20;

// ---- operators.cc ----
// op: + - * / // % ** ~ == != < <= > >= in "not in" (and/or short-circuit in the interpreter).
Value binary_op(std::string_view op, const Value& left, const Value& right);
Value unary_op(std::string_view op, const Value& operand);  // "-", "+", "not"
// object.name: dict key, namespace attribute, or a bound method of a string/dict/list.
Value get_attribute(const Value& object, const std::string& name);
// object[key]: dict key, list/string index (negative from the end); missing → undefined.
Value get_item(const Value& object, const Value& key);
// object[start:stop:step] on lists and strings (code points), Python semantics.
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items a for loop or a filter walks: list items, dict keys, string code points.
Array iterate(const Value& value);
// Python ordering (<) for numbers, strings and lists; throws for other types.
bool less_than(const Value& left, const Value& right);

// ---- filters.cc ----
Value apply_filter(std::string_view name, const Value& operand, const CallArgs& args);
bool apply_test(std::string_view name, const Value& operand, const CallArgs& args);

// ---- methods.cc ----
// A bound method such as "  x ".strip or dict.items, or undefined when there is none.
Value bound_method(const Value& self, std::string_view name);
// Python str.strip/lstrip/rstrip; chars empty → Unicode whitespace.
std::string python_strip(std::string_view text, const Value& chars, bool left, bool right);

// ---- text_case.cc ----
// Decodes the code point at text[i]; an invalid or truncated sequence decodes as its first
// byte with *length 1.
uint32_t decode_utf8(std::string_view text, size_t i, size_t* length);
void append_utf8(std::string& out, uint32_t code_point);
// Python str.upper/lower/title/capitalize for ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic.
std::string python_upper(std::string_view text);
std::string python_lower(std::string_view text);
std::string python_title(std::string_view text);
std::string python_capitalize(std::string_view text);
// Python's \w for the code points above (letters, digits, '_'), and CJK and beyond as letters.
bool is_word_code_point(uint32_t code_point);
// Python str.replace(old, new, count); count < 0 replaces all.
std::string python_replace(std::string_view text, std::string_view from, std::string_view to,
                           int64_t count);

}  // namespace vellum::jinja

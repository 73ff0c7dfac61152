// Jinja filters (`x | name(args)`) and tests (`x is name(args)`) with Jinja 3 semantics; tojson
// follows Hugging Face's override (no key sorting, no HTML escaping, ensure_ascii=False).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "tokenizer/jinja/builtins.h"

namespace vellum::jinja {
namespace {

const Value kUndefined;

const Value& arg(const CallArgs& args, size_t index, std::string_view name) {
  const Value* v = args.get(index, name);
  return v != nullptr ? *v : kUndefined;
}

bool arg_bool(const CallArgs& args, size_t index, std::string_view name, bool fallback) {
  const Value& v = arg(args, index, name);
  return v.is_undefined() ? fallback : v.truthy();
}

const std::string& require_string(const Value& v, std::string_view filter) {
  if (!v.is_string()) {
    throw RenderError(fmt::format("filter '{}' expects a string, got {}", filter, v.type_name()));
  }
  return v.as_string();
}

// "a.b" attribute paths as map/selectattr/sort use them; integers index lists.
Value attribute_path(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    int64_t index = 0;
    const auto parsed = std::from_chars(part.data(), part.data() + part.size(), index);
    if (parsed.ec == std::errc() && parsed.ptr == part.data() + part.size() && !part.empty()) {
      current = get_item(current, Value(index));
    } else {
      current = current.is_undefined() ? current : get_item(current, Value(part));
    }
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// select/reject/selectattr/rejectattr: args are (test name, test args…), shifted by `skip`.
Array filter_items(const Value& operand, const CallArgs& args, bool select, bool by_attribute) {
  std::string attribute;
  size_t next = 0;
  if (by_attribute) {
    attribute = require_string(arg(args, 0, "attribute"), "selectattr");
    next = 1;
  }
  std::string test_name;
  CallArgs test_args;
  if (next < args.positional.size()) {
    test_name = require_string(args.positional[next], "select");
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next + 1),
                                args.positional.end());
  }
  Array out;
  for (const Value& item : iterate(operand)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool passed = test_name.empty() ? subject.truthy() : apply_test(test_name, subject, test_args);
    if (passed == select) out.push_back(item);
  }
  return out;
}

Value map_items(const Value& operand, const CallArgs& args) {
  Array out;
  const Value* attribute = args.get(static_cast<size_t>(-1), "attribute");
  if (attribute != nullptr) {
    const std::string& path = require_string(*attribute, "map");
    const Value* fallback = args.get(static_cast<size_t>(-1), "default");
    for (const Value& item : iterate(operand)) {
      Value v = attribute_path(item, path);
      out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : v);
    }
    return Value::array(std::move(out));
  }
  if (args.positional.empty()) throw RenderError("filter 'map' needs a filter name or attribute=");
  const std::string& filter = require_string(args.positional[0], "map");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : iterate(operand)) out.push_back(apply_filter(filter, item, rest));
  return Value::array(std::move(out));
}

Value sort_items(const Value& operand, const CallArgs& args, bool unique) {
  const bool reverse = !unique && arg_bool(args, 0, "reverse", false);
  const bool case_sensitive = arg_bool(args, unique ? 0 : 1, "case_sensitive", false);
  const Value& attribute = arg(args, unique ? 1 : 2, "attribute");
  const auto key = [&](const Value& item) {
    Value k = attribute.is_string() ? attribute_path(item, attribute.as_string()) : item;
    if (!case_sensitive && k.is_string()) return Value(python_lower(k.as_string()));
    return k;
  };
  Array items = iterate(operand);
  if (unique) {
    Array out;
    std::vector<Value> seen;
    for (const Value& item : items) {
      const Value k = key(item);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(k); })) {
        seen.push_back(k);
        out.push_back(item);
      }
    }
    return Value::array(std::move(out));
  }
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? less_than(key(b), key(a)) : less_than(key(a), key(b));
  });
  return Value::array(std::move(items));
}

Value to_int(const Value& v, const CallArgs& args) {
  const Value& fallback = arg(args, 0, "default");
  const Value def = fallback.is_undefined() ? Value(int64_t{0}) : fallback;
  if (v.is_int()) return Value(v.as_int());
  if (v.is_number()) {
    const double f = v.as_double();
    if (!std::isfinite(f) || std::fabs(f) > 9.2e18) return def;
    return Value(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    const std::string s = python_strip(v.as_string(), Value(), true, true);
    int64_t i = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), i);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty()) return Value(i);
    double f = 0;
    const auto rf = std::from_chars(s.data(), s.data() + s.size(), f);
    if (rf.ec == std::errc() && rf.ptr == s.data() + s.size() && std::isfinite(f) && std::fabs(f) < 9.2e18) {
      return Value(static_cast<int64_t>(f));
    }
  }
  return def;
}

Value to_float(const Value& v, const CallArgs& args) {
  const Value& fallback = arg(args, 0, "default");
  const Value def = fallback.is_undefined() ? Value(0.0) : fallback;
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    const std::string s = python_strip(v.as_string(), Value(), true, true);
    double f = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), f);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty()) return Value(f);
  }
  return def;
}

std::string indent_lines(const std::string& text, const CallArgs& args) {
  const Value& width_v = arg(args, 0, "width");
  std::string pad = width_v.is_string() ? width_v.as_string()
                                        : std::string(width_v.is_int() ? static_cast<size_t>(std::clamp<int64_t>(width_v.as_int(), 0, 1024)) : 4, ' ');
  const bool first = arg_bool(args, 1, "first", false);
  const bool blank = arg_bool(args, 2, "blank", false);
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= text.size()) {
    const size_t nl = text.find('\n', start);
    const std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((!is_first || first) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value min_max(const Value& operand, const CallArgs& args, bool want_max) {
  Array items = iterate(operand);
  if (items.empty()) return Value::undefined("min/max of an empty sequence");
  const bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
  const Value& attribute = arg(args, 1, "attribute");
  const auto key = [&](const Value& item) {
    Value k = attribute.is_string() ? attribute_path(item, attribute.as_string()) : item;
    return (!case_sensitive && k.is_string()) ? Value(python_lower(k.as_string())) : k;
  };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    if (want_max ? less_than(key(items[best]), key(items[i])) : less_than(key(items[i]), key(items[best]))) {
      best = i;
    }
  }
  return items[best];
}


// Python's "fmt % args" for the conversions templates use: %s %r %d %i %f %% (with flags,
// width and precision for %d/%f).
std::string percent_format(const std::string& pattern, const CallArgs& args) {
  std::string out;
  size_t next_arg = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    size_t j = i + 1;
    while (j < pattern.size() && std::string_view("-+ 0#.0123456789").find(pattern[j]) != std::string_view::npos) ++j;
    if (j >= pattern.size()) throw RenderError("format: incomplete format specifier");
    const std::string spec = pattern.substr(i + 1, j - i - 1);
    const char conversion = pattern[j];
    i = j;
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next_arg >= args.positional.size()) throw RenderError("format: not enough arguments for format string");
    const Value& v = args.positional[next_arg++];
    if (spec.size() > 8) throw RenderError("format: format specifier too long");
    // printf flags → fmt: '-' left-aligns, '0' zero-pads, '+'/' ' sign, then width.precision.
    std::string sign;
    bool left = false;
    bool zero = false;
    size_t k = 0;
    for (; k < spec.size() && std::string_view("-+ 0#").find(spec[k]) != std::string_view::npos; ++k) {
      if (spec[k] == '-') left = true;
      if (spec[k] == '0') zero = true;
      if (spec[k] == '+' || spec[k] == ' ') sign = spec[k];
    }
    const std::string size = spec.substr(k);  // width[.precision]
    const std::string align = left ? "<" : ">";
    switch (conversion) {
      case 's': out += fmt::format(fmt::runtime("{:" + align + size + "}"), v.to_output()); break;
      case 'r': out += fmt::format(fmt::runtime("{:" + align + size + "}"), v.repr()); break;
      case 'd':
      case 'i':
      case 'f': {
        if (!v.is_number()) throw RenderError(fmt::format("format: %{} needs a number", conversion));
        const std::string number_spec = (left ? "<" : "") + sign + (zero && !left ? "0" : "") + size;
        if (conversion == 'f') {
          const std::string precision = size.find('.') == std::string::npos ? ".6" : "";
          out += fmt::format(fmt::runtime("{:" + number_spec + precision + "f}"), v.as_double());
        } else {
          out += fmt::format(fmt::runtime("{:" + number_spec + "d}"), static_cast<int64_t>(v.as_double()));
        }
        break;
      }
      default: throw RenderError(fmt::format("format: unsupported conversion '%{}'", conversion));
    }
  }
  return out;
}
}  // namespace

Value apply_filter(std::string_view name, const Value& v, const CallArgs& args) {
  if (name == "safe") return v;
  if (name == "default" || name == "d") {
    const bool use_default = arg_bool(args, 1, "boolean", false) ? !v.truthy() : v.is_undefined();
    if (!use_default) return v;
    const Value& fallback = arg(args, 0, "default_value");
    return fallback.is_undefined() ? Value(std::string()) : fallback;
  }
  if (name == "length" || name == "count") {
    switch (v.kind()) {
      case Value::Kind::kUndefined: return Value(int64_t{0});
      case Value::Kind::kString: return Value(static_cast<int64_t>(utf8_length(v.as_string())));
      case Value::Kind::kArray: return Value(static_cast<int64_t>(v.as_array().size()));
      case Value::Kind::kObject:
      case Value::Kind::kNamespace: return Value(static_cast<int64_t>(v.as_object().entries.size()));
      default: throw RenderError(fmt::format("object of type '{}' has no length", v.type_name()));
    }
  }
  if (name == "tojson") {
    if (args.get(static_cast<size_t>(-1), "separators") != nullptr) {
      throw RenderError("filter 'tojson': the separators argument is not supported");
    }
    const Value& indent = arg(args, 0, "indent");
    const int width = indent.is_int() ? static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64)) : -1;
    return Value(v.to_json_text(width, arg_bool(args, 99, "sort_keys", false)));
  }
  if (name == "string") return Value(v.to_output());
  if (name == "items") {
    if (v.is_undefined()) return Value::array({});
    if (!v.is_object()) throw RenderError(fmt::format("filter 'items' expects a dict, got {}", v.type_name()));
    return bound_method(v, "items").as_callable().fn(CallArgs{});
  }
  if (name == "list") return Value::array(iterate(v));
  if (name == "first" || name == "last") {
    Array items = iterate(v);
    if (items.empty()) return Value::undefined(fmt::format("{} of an empty sequence", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      Array chars = iterate(v);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
      return Value(std::move(out));
    }
    Array items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::array(std::move(items));
  }
  if (name == "join") {
    const Value& sep = arg(args, 0, "d");
    const Value& attribute = arg(args, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      if (!first) out += sep.is_undefined() ? "" : sep.to_output();
      first = false;
      out += (attribute.is_string() ? attribute_path(item, attribute.as_string()) : item).to_output();
      if (out.size() > kMaxStringBytes) throw RenderError("join result is larger than 64 MiB");
    }
    return Value(std::move(out));
  }
  if (name == "map") return map_items(v, args);
  if (name == "select" || name == "reject") return Value::array(filter_items(v, args, name == "select", false));
  if (name == "selectattr" || name == "rejectattr") {
    return Value::array(filter_items(v, args, name == "selectattr", true));
  }
  if (name == "sort") return sort_items(v, args, false);
  if (name == "unique") return sort_items(v, args, true);
  if (name == "min" || name == "max") return min_max(v, args, name == "max");
  if (name == "sum") {
    Value total = arg(args, 1, "start");
    if (total.is_undefined()) total = Value(int64_t{0});
    const Value& attribute = arg(args, 0, "attribute");
    for (const Value& item : iterate(v)) {
      total = binary_op("+", total, attribute.is_string() ? attribute_path(item, attribute.as_string()) : item);
    }
    return total;
  }
  if (name == "dictsort") {
    if (!v.is_object()) throw RenderError("filter 'dictsort' expects a dict");
    Value items = apply_filter("items", v, CallArgs{});
    CallArgs sort_args;
    sort_args.keyword.emplace_back("attribute", Value(arg_bool(args, 1, "by", false) ? "1" : "0"));
    sort_args.keyword.emplace_back("case_sensitive", Value(arg_bool(args, 0, "case_sensitive", false)));
    sort_args.keyword.emplace_back("reverse", Value(arg_bool(args, 2, "reverse", false)));
    return sort_items(items, sort_args, false);
  }
  if (name == "int") return to_int(v, args);
  if (name == "float") return to_float(v, args);
  if (name == "abs") {
    if (!v.is_number()) throw RenderError(fmt::format("filter 'abs' expects a number, got {}", v.type_name()));
    return v.is_int() ? (v.as_int() < 0 ? unary_op("-", v) : Value(v.as_int())) : Value(std::fabs(v.as_double()));
  }
  if (name == "round") {
    if (!v.is_number()) throw RenderError(fmt::format("filter 'round' expects a number, got {}", v.type_name()));
    const Value& precision = arg(args, 0, "precision");
    const Value& method = arg(args, 1, "method");
    const int64_t digits = precision.is_int() ? std::clamp<int64_t>(precision.as_int(), -20, 20) : 0;
    const double scale = std::pow(10.0, static_cast<double>(digits));
    const double x = v.as_double() * scale;
    const std::string how = method.is_string() ? method.as_string() : "common";
    double r = 0;
    if (how == "common") r = std::nearbyint(x);  // Python round(): half to even
    else if (how == "floor") r = std::floor(x);
    else if (how == "ceil") r = std::ceil(x);
    else throw RenderError("filter 'round': method must be 'common', 'floor' or 'ceil'");
    return Value(r / scale);
  }
  if (name == "batch") {  // lists of `linecount` items, the last padded with fill_with if given
    const Value& size_v = arg(args, 0, "linecount");
    if (!size_v.is_int() || size_v.as_int() <= 0) throw RenderError("filter 'batch' needs a positive size");
    const auto size = static_cast<size_t>(size_v.as_int());
    const Value& fill = arg(args, 1, "fill_with");
    Array batches;
    Array current;
    for (const Value& item : iterate(v)) {
      current.push_back(item);
      if (current.size() == size) batches.push_back(Value::array(std::exchange(current, {})));
    }
    if (!current.empty()) {
      if (!fill.is_undefined()) current.resize(size, fill);
      batches.push_back(Value::array(std::move(current)));
    }
    return Value::array(std::move(batches));
  }
  if (name == "attr") return get_attribute(v, require_string(arg(args, 0, "name"), "attr"));
  // Filters on strings; undefined prints as "".
  const std::string text = v.to_output();
  if (name == "trim") return Value(python_strip(text, arg(args, 0, "chars"), true, true));
  if (name == "upper") return Value(python_upper(text));
  if (name == "lower") return Value(python_lower(text));
  if (name == "capitalize") return Value(python_capitalize(text));
  if (name == "title") return Value(python_title(text));
  if (name == "replace") {
    const Value& count = arg(args, 2, "count");
    return Value(python_replace(text, require_string(arg(args, 0, "old"), "replace"),
                                require_string(arg(args, 1, "new"), "replace"),
                                count.is_int() ? count.as_int() : -1));
  }
  if (name == "indent") return Value(indent_lines(text, args));
  if (name == "escape" || name == "e") return Value(html_escape(text));
  if (name == "wordcount") {  // Jinja counts \w+ runs
    int64_t count = 0;
    bool in_word = false;
    for (size_t i = 0; i < text.size();) {
      size_t n = 0;
      const bool word = is_word_code_point(decode_utf8(text, i, &n));
      if (word && !in_word) ++count;
      in_word = word;
      i += n;
    }
    return Value(count);
  }
  if (name == "format") {
    try {
      return Value(percent_format(text, args));
    } catch (const fmt::format_error& e) {
      throw RenderError(fmt::format("format: invalid format specifier ({})", e.what()));
    }
  }
  if (name == "truncate") {  // Jinja: length=255, killwords=False, end='...', leeway=5
    const Value& length_v = arg(args, 0, "length");
    const Value& end_v = arg(args, 2, "end");
    const Value& leeway_v = arg(args, 3, "leeway");
    const int64_t length = length_v.is_int() ? length_v.as_int() : 255;
    const std::string end = end_v.is_string() ? end_v.as_string() : "...";
    const int64_t leeway = leeway_v.is_int() ? leeway_v.as_int() : 5;
    const auto offsets = utf8_offsets(text);
    const auto num_chars = static_cast<int64_t>(offsets.size() - 1);
    if (num_chars <= length + leeway) return Value(text);
    const int64_t keep = std::clamp<int64_t>(length - static_cast<int64_t>(utf8_length(end)), 0, num_chars);
    std::string kept = text.substr(0, offsets[static_cast<size_t>(keep)]);
    if (!arg_bool(args, 1, "killwords", false)) {
      const size_t space = kept.rfind(' ');
      if (space != std::string::npos) kept.erase(space);
    }
    return Value(kept + end);
  }
  if (name == "center") {  // Python str.center
    const Value& width_v = arg(args, 0, "width");
    const auto width = static_cast<size_t>(std::clamp<int64_t>(width_v.is_int() ? width_v.as_int() : 80, 0, 4096));
    const size_t num_chars = utf8_length(text);
    if (width <= num_chars) return Value(text);
    const size_t total = width - num_chars;
    const size_t left = total / 2 + (total & width & 1);
    return Value(std::string(left, ' ') + text + std::string(total - left, ' '));
  }
  throw RenderError(fmt::format("unknown filter '{}'", name));
}

bool apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.kind() == Value::Kind::kInt;
  if (name == "float") return v.kind() == Value::Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_array() || v.is_object();
  if (name == "callable") return v.is_callable();
  if (name == "lower") return v.is_string() && v.as_string() == python_lower(v.as_string());
  if (name == "upper") return v.is_string() && v.as_string() == python_upper(v.as_string());
  if (name == "even" || name == "odd") {
    if (!v.is_int()) throw RenderError(fmt::format("test '{}' expects an integer", name));
    return (v.as_int() % 2 == 0) == (name == "even");
  }
  const Value& other = arg(args, 0, "value");
  if (name == "divisibleby") {
    if (!v.is_int() || !other.is_int() || other.as_int() == 0) {
      throw RenderError("test 'divisibleby' expects integers and a non-zero divisor");
    }
    return v.as_int() % other.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.equals(other);
  if (name == "ne" || name == "!=") return !v.equals(other);
  if (name == "lt" || name == "lessthan" || name == "<") return less_than(v, other);
  if (name == "le" || name == "<=") return !less_than(other, v);
  if (name == "gt" || name == "greaterthan" || name == ">") return less_than(other, v);
  if (name == "ge" || name == ">=") return !less_than(v, other);
  if (name == "in") return binary_op("in", v, other).as_bool();
  if (name == "sameas") {
    if (v.is_none() || v.is_bool() || v.is_undefined()) return v.kind() == other.kind() && v.equals(other);
    return v.equals(other) && v.kind() == other.kind();
  }
  throw RenderError(fmt::format("unknown test '{}'", name));
}

}  // namespace vellum::jinja

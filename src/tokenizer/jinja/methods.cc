// Python methods that chat templates call on strings, dicts and lists: "x".strip(),
// content.split('</think>'), message.get('content', ''), tools.items()…
#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/jinja/builtins.h"

namespace vellum::jinja {
namespace {

bool is_unicode_space(uint32_t cp) {  // Python str.isspace()
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

const std::string& arg_string(const CallArgs& args, size_t index, std::string_view name,
                              std::string_view method) {
  const Value* v = args.get(index, name);
  if (v == nullptr || !v->is_string()) {
    throw RenderError(fmt::format("{}() expects a string argument '{}'", method, name));
  }
  return v->as_string();
}

int64_t arg_int(const CallArgs& args, size_t index, std::string_view name, int64_t fallback) {
  const Value* v = args.get(index, name);
  if (v == nullptr || v->is_none()) return fallback;
  if (!v->is_int()) throw RenderError(fmt::format("argument '{}' must be an integer", name));
  return v->as_int();
}

Array split(const std::string& s, const Value* sep, int64_t max_split) {
  Array parts;
  if (sep == nullptr || sep->is_none()) {  // runs of whitespace, no empty parts
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        parts.emplace_back(python_strip(s.substr(i), Value(), false, true));
        break;
      }
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      parts.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  if (!sep->is_string()) throw RenderError("split() separator must be a string or none");
  const std::string& d = sep->as_string();
  if (d.empty()) throw RenderError("split() separator must not be empty");
  size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t found = s.find(d, start);
    if (found == std::string::npos) break;
    parts.emplace_back(s.substr(start, found - start));
    start = found + d.size();
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  const auto one = [&](const Value& a) {
    if (!a.is_string()) throw RenderError("startswith()/endswith() expects a string or a list of strings");
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_array()) {
    return std::any_of(affix.as_array().begin(), affix.as_array().end(), one);
  }
  return one(affix);
}

// str.format with {} / {0} / {name} fields (no format specs).
std::string python_format(const std::string& pattern, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < pattern.size() && pattern[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t close = pattern.find('}', i);
      if (close == std::string::npos) throw RenderError("format(): unmatched '{' in format string");
      const std::string field = pattern.substr(i + 1, close - i - 1);
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index++] : nullptr;
      } else if (std::all_of(field.begin(), field.end(), ::isdigit) && field.size() < 6) {
        const size_t index = std::stoul(field);
        v = index < args.positional.size() ? &args.positional[index] : nullptr;
      } else {
        for (const auto& [key, value] : args.keyword) {
          if (key == field) v = &value;
        }
      }
      if (v == nullptr) throw RenderError(fmt::format("format(): no argument for field '{{{}}}'", field));
      out += v->to_output();
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

Value string_method(const Value& self, std::string_view name, const CallArgs& args) {
  const std::string& s = self.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = args.get(0, "chars");
    return Value(python_strip(s, chars ? *chars : Value(), name != "rstrip", name != "lstrip"));
  }
  if (name == "split") return Value::array(split(s, args.get(0, "sep"), arg_int(args, 1, "maxsplit", -1)));
  if (name == "startswith" || name == "endswith") {
    const Value* affix = args.get(0, "prefix");
    if (affix == nullptr) throw RenderError(fmt::format("{}() needs an argument", name));
    return Value(affix_match(s, *affix, name == "startswith"));
  }
  if (name == "upper") return Value(python_upper(s));
  if (name == "lower") return Value(python_lower(s));
  if (name == "title") return Value(python_title(s));
  if (name == "capitalize") return Value(python_capitalize(s));
  if (name == "replace") {
    return Value(python_replace(s, arg_string(args, 0, "old", name), arg_string(args, 1, "new", name),
                                arg_int(args, 2, "count", -1)));
  }
  if (name == "find") {
    const size_t at = s.find(arg_string(args, 0, "sub", name));
    return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.substr(0, at))));
  }
  if (name == "count") {
    const std::string& sub = arg_string(args, 0, "sub", name);
    if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
    int64_t count = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++count;
    return Value(count);
  }
  if (name == "join") {
    const Value* items = args.get(0, "iterable");
    if (items == nullptr) throw RenderError("join() needs an argument");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(*items)) {
      if (!item.is_string()) throw RenderError("join() expects a sequence of strings");
      if (!first) out += s;
      first = false;
      out += item.as_string();
    }
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    Array lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.emplace_back(s.substr(start, i - start));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < s.size()) lines.emplace_back(s.substr(start));
    return Value::array(std::move(lines));
  }
  if (name == "format") return Value(python_format(s, args));
  const auto all_of = [&](auto pred) {
    return Value(!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
      return pred(static_cast<unsigned char>(c)) != 0;
    }));
  };
  if (name == "isdigit") return all_of(::isdigit);
  if (name == "isalpha") return all_of(::isalpha);
  if (name == "isalnum") return all_of(::isalnum);
  if (name == "isspace") return all_of(::isspace);
  if (name == "islower") return Value(s != python_upper(s) && s == python_lower(s));
  if (name == "isupper") return Value(s != python_lower(s) && s == python_upper(s));
  return Value::undefined();
}

Value dict_method(const Value& self, std::string_view name, const CallArgs& args) {
  const Object& object = self.as_object();
  if (name == "items" || name == "keys" || name == "values") {
    Array out;
    for (const auto& [key, value] : object.entries) {
      if (name == "items") out.push_back(Value::tuple({Value(key), value}));
      else if (name == "keys") out.emplace_back(key);
      else out.push_back(value);
    }
    return Value::array(std::move(out));
  }
  if (name == "get") {
    const Value* key = args.get(0, "key");
    if (key == nullptr) throw RenderError("get() needs a key");
    const Value* found = key->is_string() ? object.find(key->as_string()) : nullptr;
    if (found != nullptr) return *found;
    const Value* fallback = args.get(1, "default");
    return fallback != nullptr ? *fallback : Value::none();
  }
  return Value::undefined();
}

Value list_method(const Value& self, std::string_view name, const CallArgs& args) {
  const Array& items = self.as_array();
  if (name == "index" || name == "count") {
    const Value* needle = args.get(0, "value");
    if (needle == nullptr) throw RenderError(fmt::format("{}() needs an argument", name));
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].equals(*needle)) continue;
      if (name == "index") return Value(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") throw RenderError(fmt::format("{} is not in list", needle->repr()));
    return Value(count);
  }
  if (name == "append" || name == "pop" || name == "extend" || name == "insert" ||
      name == "remove" || name == "clear" || name == "sort" || name == "reverse") {
    throw RenderError(fmt::format(
        "lists are immutable in chat templates: '{}' is not allowed (build a new list with + or "
        "keep state in a namespace)", name));
  }
  return Value::undefined();
}

bool is_method(const Value& self, std::string_view name) {
  static constexpr std::string_view kString[] = {
      "strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower", "title",
      "capitalize", "replace", "find", "count", "join", "splitlines", "format", "isdigit",
      "isalpha", "isalnum", "isspace", "islower", "isupper"};
  static constexpr std::string_view kDict[] = {"items", "keys", "values", "get"};
  static constexpr std::string_view kList[] = {"index", "count", "append", "pop", "extend",
                                               "insert", "remove", "clear", "sort", "reverse"};
  const auto in = [&](const auto& names) {
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
  };
  if (self.is_string()) return in(kString);
  if (self.is_object()) return in(kDict);
  if (self.is_array()) return in(kList);
  return false;
}

}  // namespace

Value bound_method(const Value& self, std::string_view name) {
  if (!is_method(self, name)) return Value::undefined();
  std::string method(name);
  return Value::callable(method, [self, method](const CallArgs& args) {
    if (self.is_string()) return string_method(self, method, args);
    if (self.is_object()) return dict_method(self, method, args);
    return list_method(self, method, args);
  });
}

std::string python_strip(std::string_view text, const Value& chars, bool left, bool right) {
  if (!chars.is_undefined() && !chars.is_none() && !chars.is_string()) {
    throw RenderError("strip() argument must be a string or none");
  }
  const bool whitespace = !chars.is_string();
  const auto strip_this = [&](uint32_t cp, std::string_view encoded) {
    if (whitespace) return is_unicode_space(cp);
    const std::string& set = chars.as_string();
    for (size_t i = 0; i < set.size();) {
      size_t n = 0;
      decode_utf8(set, i, &n);
      if (set.substr(i, n) == encoded) return true;
      i += n;
    }
    return false;
  };
  const auto offsets = utf8_offsets(text);
  size_t begin = 0;
  size_t end = offsets.size() - 1;  // in code points
  const auto at = [&](size_t k) {
    size_t n = 0;
    const uint32_t cp = decode_utf8(text, offsets[k], &n);
    return strip_this(cp, text.substr(offsets[k], offsets[k + 1] - offsets[k]));
  };
  if (left) {
    while (begin < end && at(begin)) ++begin;
  }
  if (right) {
    while (end > begin && at(end - 1)) --end;
  }
  return std::string(text.substr(offsets[begin], offsets[end] - offsets[begin]));
}

std::string python_replace(std::string_view text, std::string_view from, std::string_view to,
                           int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every code point
    const auto offsets = utf8_offsets(text);
    int64_t done = 0;
    for (size_t k = 0; k + 1 <= offsets.size(); ++k) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (k + 1 < offsets.size()) out += text.substr(offsets[k], offsets[k + 1] - offsets[k]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = text.find(from, start);
    if (found == std::string_view::npos) break;
    out += text.substr(start, found - start);
    out += to;
    if (out.size() > kMaxStringBytes) throw RenderError("replace() result is larger than 64 MiB");
    start = found + from.size();
    ++done;
  }
  out += text.substr(start);
  return out;
}

}  // namespace vellum::jinja

#include "structured/json_schema.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "common/check.h"
#include "structured/regex.h"

namespace vellum::structured {
namespace {

using json = nlohmann::ordered_json;
using Sequence = GrammarBuilder::Sequence;
using Item = GrammarBuilder::Item;

const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "discriminator", "strict"};
const std::set<std::string> kSupported = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "anyOf", "oneOf",
    "allOf", "$ref"};

// Format name -> regex over the string's characters.
const std::map<std::string, std::string> kFormats = {
    {"date", R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))"},
    {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"date-time",
     R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
    {"email", R"([A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(\.[A-Za-z0-9\-]{1,63}){1,8})"},
    {"ipv4", R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"},
    {"uri", R"([a-zA-Z][a-zA-Z0-9+.\-]{0,31}:[^\s"\\<>]{1,2048})"},
};

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const json& root, const JsonGrammarOptions& options)
      : b_(b), root_(root), options_(options) {}

  uint32_t compile_root() {
    const uint32_t rule = b_.new_rule("root");
    b_.add_alternative(rule, compile(root_, "#", 0));
    return rule;
  }

  uint32_t any_object() { return object_any_rule(); }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "JSON schema at '{}': {}", path, what);
  }

  Sequence ws() {
    if (!options_.any_whitespace) return {};
    if (ws_ == UINT32_MAX) {
      ws_ = b_.new_rule("ws");
      b_.add_alternative(ws_, {});
      b_.add_alternative(ws_, b_.literal(" "));
      ByteSet indent;
      indent.set(' ');
      indent.set('\t');
      Sequence nl = b_.literal("\n");
      const Sequence spaces = b_.repeat({b_.bytes(indent)}, 0, 20);
      nl.insert(nl.end(), spaces.begin(), spaces.end());
      b_.add_alternative(ws_, std::move(nl));
    }
    return {b_.rule(ws_)};
  }
  Sequence comma() {
    Sequence s = ws();
    const Sequence lit = b_.literal(options_.any_whitespace ? "," : ", ");
    s.insert(s.end(), lit.begin(), lit.end());
    const Sequence after = ws();
    s.insert(s.end(), after.begin(), after.end());
    return s;
  }
  Sequence colon() {
    Sequence s = ws();
    const Sequence lit = b_.literal(options_.any_whitespace ? ":" : ": ");
    s.insert(s.end(), lit.begin(), lit.end());
    const Sequence after = ws();
    s.insert(s.end(), after.begin(), after.end());
    return s;
  }
  static void append(Sequence& to, const Sequence& what) { to.insert(to.end(), what.begin(), what.end()); }

  Item string_char() {
    if (char_ == UINT32_MAX) {
      char_ = b_.new_rule("json_char");
      std::vector<std::pair<uint32_t, uint32_t>> plain = {{0x20, '"' - 1}, {'"' + 1, '\\' - 1},
                                                          {'\\' + 1, 0x10FFFF}};
      b_.add_alternative(char_, {b_.code_points(plain)});
      ByteSet escapes;
      for (char c : std::string("\"\\/bfnrt")) escapes.set(static_cast<uint8_t>(c));
      b_.add_alternative(char_, {b_.byte('\\'), b_.bytes(escapes)});
      ByteSet hex;
      for (char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<uint8_t>(c));
      Sequence u = b_.literal("\\u");
      for (int i = 0; i < 4; ++i) u.push_back(b_.bytes(hex));
      b_.add_alternative(char_, std::move(u));
    }
    return b_.rule(char_);
  }
  uint32_t string_rule() {
    if (string_ == UINT32_MAX) {
      string_ = b_.new_rule("json_string");
      Sequence s = b_.literal("\"");
      s.push_back(b_.star({string_char()}));
      append(s, b_.literal("\""));
      b_.add_alternative(string_, std::move(s));
    }
    return string_;
  }
  Sequence integer_body() {
    ByteSet digits;
    for (char c = '0'; c <= '9'; ++c) digits.set(static_cast<uint8_t>(c));
    ByteSet nonzero = digits;
    nonzero.reset('0');
    Sequence s = {b_.optional(b_.literal("-"))};
    Sequence many = {b_.bytes(nonzero)};
    append(many, b_.repeat({b_.bytes(digits)}, 0, 15));
    s.push_back(b_.choice("json_int_digits", {b_.literal("0"), many}));
    return s;
  }
  uint32_t integer_rule() {
    if (integer_ == UINT32_MAX) {
      integer_ = b_.new_rule("json_integer");
      b_.add_alternative(integer_, integer_body());
    }
    return integer_;
  }
  uint32_t number_rule() {
    if (number_ == UINT32_MAX) {
      number_ = b_.new_rule("json_number");
      ByteSet digits;
      for (char c = '0'; c <= '9'; ++c) digits.set(static_cast<uint8_t>(c));
      Sequence s = integer_body();
      Sequence frac = b_.literal(".");
      append(frac, b_.repeat({b_.bytes(digits)}, 1, 15));
      s.push_back(b_.optional(frac));
      ByteSet e;
      e.set('e');
      e.set('E');
      ByteSet sign;
      sign.set('+');
      sign.set('-');
      Sequence exp = {b_.bytes(e), b_.optional({b_.bytes(sign)})};
      // Two exponent digits keep every number within a double's range.
      append(exp, b_.repeat({b_.bytes(digits)}, 1, 2));
      s.push_back(b_.optional(exp));
      b_.add_alternative(number_, std::move(s));
    }
    return number_;
  }
  uint32_t value_rule() {
    if (value_ == UINT32_MAX) {
      value_ = b_.new_rule("json_value");
      b_.add_alternative(value_, {b_.rule(object_any_rule())});
      b_.add_alternative(value_, {b_.rule(array_any_rule())});
      b_.add_alternative(value_, {b_.rule(string_rule())});
      b_.add_alternative(value_, {b_.rule(number_rule())});
      for (const char* lit : {"true", "false", "null"}) b_.add_alternative(value_, b_.literal(lit));
    }
    return value_;
  }
  uint32_t object_any_rule() {
    if (object_any_ == UINT32_MAX) {
      object_any_ = b_.new_rule("json_object");
      const uint32_t value = value_rule();
      b_.add_alternative(object_any_, object_of({b_.rule(value)}));
    }
    return object_any_;
  }
  // "{" (string ":" value ("," string ":" value)*)? "}" with `value` for each member.
  Sequence object_of(const Sequence& value) {
    Sequence member = {b_.rule(string_rule())};
    append(member, colon());
    append(member, value);
    Sequence more = comma();
    append(more, member);
    Sequence body = member;
    body.push_back(b_.star(more));
    Sequence s = b_.literal("{");
    append(s, ws());
    s.push_back(b_.optional(body));
    append(s, ws());
    append(s, b_.literal("}"));
    return s;
  }
  uint32_t array_any_rule() {
    if (array_any_ == UINT32_MAX) {
      array_any_ = b_.new_rule("json_array");
      b_.add_alternative(array_any_, array_of({b_.rule(value_rule())}, 0, -1));
    }
    return array_any_;
  }
  Sequence array_of(const Sequence& item, int64_t min, int64_t max) {
    Sequence s = b_.literal("[");
    append(s, ws());
    if (max != 0) {
      Sequence more = comma();
      append(more, item);
      Sequence body = item;
      append(body, b_.repeat(more, std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1));
      if (min == 0) {
        s.push_back(b_.optional(body));
      } else {
        append(s, body);
      }
    }
    append(s, ws());
    append(s, b_.literal("]"));
    return s;
  }

  int64_t count_keyword(const json& s, const char* key, const std::string& path) const {
    const json& v = s.at(key);
    if (!v.is_number_integer() && !v.is_number_unsigned()) {
      fail(path, fmt::format("'{}' must be a non-negative integer", key));
    }
    const int64_t n = v.get<int64_t>();
    if (n < 0) fail(path, fmt::format("'{}' must be a non-negative integer", key));
    if (n > b_.limits().max_repetition) {
      fail(path, fmt::format("'{}' of {} is larger than the supported {}", key, n,
                             b_.limits().max_repetition));
    }
    return n;
  }

  Sequence literal_value(const json& v) { return b_.literal(v.dump()); }

  Sequence compile(const json& s, const std::string& path, int depth) {
    if (depth > b_.limits().max_nesting) {
      fail(path, fmt::format("schemas nest deeper than {}", b_.limits().max_nesting));
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "the schema `false` matches nothing");
      return {b_.rule(value_rule())};
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (kSupported.contains(key) || kAnnotations.contains(key) || key.rfind("x-", 0) == 0) {
        continue;
      }
      fail(path, fmt::format("the keyword '{}' is not supported by Vellum's structured outputs; "
                             "remove it (supported: type, enum, const, properties, required, "
                             "additionalProperties, items, minItems, maxItems, minLength, "
                             "maxLength, pattern, format, anyOf, oneOf, allOf, $ref)",
                             key));
    }
    if (s.contains("$ref")) return {b_.rule(resolve_ref(s.at("$ref"), path, depth))};
    if (s.contains("const")) return literal_value(s.at("const"));
    if (s.contains("enum")) {
      const json& values = s.at("enum");
      if (!values.is_array() || values.empty()) fail(path, "'enum' must be a non-empty array");
      std::vector<Sequence> alternatives;
      for (const json& v : values) alternatives.push_back(literal_value(v));
      return {b_.choice("enum", std::move(alternatives))};
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(key)) continue;
      const json& list = s.at(key);
      if (!list.is_array() || list.empty()) fail(path, fmt::format("'{}' must be a non-empty array", key));
      for (const char* other : {"type", "properties", "items", "anyOf", "oneOf", "allOf"}) {
        if (other != std::string(key) && s.contains(other)) {
          fail(path, fmt::format("combining '{}' with '{}' in one schema is not supported; move "
                                 "'{}' into each alternative",
                                 key, other, other));
        }
      }
      if (std::string(key) == "allOf") {
        if (list.size() != 1) fail(path, "'allOf' with more than one schema is not supported");
        return compile(list[0], path + "/allOf/0", depth + 1);
      }
      std::vector<Sequence> alternatives;
      for (size_t i = 0; i < list.size(); ++i) {
        alternatives.push_back(compile(list[i], fmt::format("{}/{}/{}", path, key, i), depth + 1));
      }
      return {b_.choice(key, std::move(alternatives))};
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s.at("type");
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) fail(path, "'type' must be a string or a list of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(path, "'type' must be a string or a non-empty list of strings");
      }
    } else if (s.contains("properties") || s.contains("required") ||
               s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
               s.contains("maxLength")) {
      types.push_back("string");
    } else {
      return {b_.rule(value_rule())};
    }
    if (types.size() == 1) return compile_type(types[0], s, path, depth);
    std::vector<Sequence> alternatives;
    for (const std::string& t : types) alternatives.push_back(compile_type(t, s, path, depth));
    return {b_.choice("types", std::move(alternatives))};
  }

  uint32_t resolve_ref(const json& ref_value, const std::string& path, int depth) {
    if (!ref_value.is_string()) fail(path, "'$ref' must be a string");
    const std::string ref = ref_value.get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    const json* target = nullptr;
    if (ref == "#") {
      target = &root_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string p(prefix);
        if (ref.rfind(p, 0) != 0) continue;
        const std::string section = p.substr(2, p.size() - 3);
        const std::string name = ref.substr(p.size());
        if (root_.is_object() && root_.contains(section) && root_.at(section).is_object() &&
            root_.at(section).contains(name)) {
          target = &root_.at(section).at(name);
        }
      }
      if (target == nullptr) {
        fail(path, fmt::format("'$ref' {:?} does not resolve; only local references to \"#\", "
                               "\"#/$defs/NAME\" and \"#/definitions/NAME\" are supported",
                               ref));
      }
    }
    const uint32_t rule = b_.new_rule(ref);
    refs_.emplace(ref, rule);  // before compiling: the target may refer back to itself
    b_.add_alternative(rule, compile(*target, ref, depth + 1));
    return rule;
  }

  Sequence compile_type(const std::string& type, const json& s, const std::string& path,
                        int depth) {
    if (type == "string") return compile_string(s, path);
    if (type == "integer") return {b_.rule(integer_rule())};
    if (type == "number") return {b_.rule(number_rule())};
    if (type == "boolean") return {b_.choice("boolean", {b_.literal("true"), b_.literal("false")})};
    if (type == "null") return b_.literal("null");
    if (type == "array") {
      Sequence item = {b_.rule(value_rule())};
      if (s.contains("items")) {
        if (s.at("items").is_array()) {
          fail(path, "'items' as a list (tuple validation) is not supported; use one schema");
        }
        item = compile(s.at("items"), path + "/items", depth + 1);
      }
      const int64_t min = s.contains("minItems") ? count_keyword(s, "minItems", path) : 0;
      const int64_t max = s.contains("maxItems") ? count_keyword(s, "maxItems", path) : -1;
      if (max >= 0 && max < min) fail(path, "'maxItems' is smaller than 'minItems'");
      return array_of(item, min, max);
    }
    if (type == "object") return compile_object(s, path, depth);
    fail(path, fmt::format("unknown type {:?}; use string, integer, number, boolean, null, "
                           "array or object",
                           type));
  }

  Sequence compile_string(const json& s, const std::string& path) {
    Sequence out = b_.literal("\"");
    const int count = static_cast<int>(s.contains("pattern")) + static_cast<int>(s.contains("format")) +
                      static_cast<int>(s.contains("minLength") || s.contains("maxLength"));
    if (count > 1) {
      fail(path, "combining 'pattern', 'format' and 'minLength'/'maxLength' is not supported; "
                 "use one of them");
    }
    if (s.contains("pattern")) {
      if (!s.at("pattern").is_string()) fail(path, "'pattern' must be a string");
      try {
        append(out, compile_regex(b_, s.at("pattern").get<std::string>(), RegexOptions{true}));
      } catch (const Error& e) {
        fail(path, e.what());
      }
    } else if (s.contains("format")) {
      const json& f = s.at("format");
      if (!f.is_string() || !kFormats.contains(f.get<std::string>())) {
        fail(path, fmt::format("format {} is not supported; supported formats: date, time, "
                               "date-time, uuid, email, ipv4, uri",
                               f.dump()));
      }
      append(out, compile_regex(b_, kFormats.at(f.get<std::string>()), RegexOptions{true}));
    } else {
      const int64_t min = s.contains("minLength") ? count_keyword(s, "minLength", path) : 0;
      const int64_t max = s.contains("maxLength") ? count_keyword(s, "maxLength", path) : -1;
      if (max >= 0 && max < min) fail(path, "'maxLength' is smaller than 'minLength'");
      if (min == 0 && max < 0) return {b_.rule(string_rule())};
      append(out, b_.repeat({string_char()}, min, max));
    }
    append(out, b_.literal("\""));
    return out;
  }

  Sequence compile_object(const json& s, const std::string& path, int depth) {
    std::vector<std::pair<std::string, Sequence>> members;  // key literal, value
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s.at("required");
      if (!r.is_array()) fail(path, "'required' must be a list of property names");
      for (const json& name : r) {
        if (!name.is_string()) fail(path, "'required' must be a list of property names");
        required.insert(name.get<std::string>());
      }
    }
    std::vector<bool> is_required;
    if (s.contains("properties")) {
      const json& props = s.at("properties");
      if (!props.is_object()) fail(path, "'properties' must be an object");
      for (const auto& [name, schema] : props.items()) {
        Sequence kv = b_.literal(json(name).dump());
        append(kv, colon());
        append(kv, compile(schema, path + "/properties/" + name, depth + 1));
        members.emplace_back(name, std::move(kv));
        is_required.push_back(required.contains(name));
      }
    }
    for (const std::string& name : required) {
      bool found = false;
      for (const auto& m : members) found = found || m.first == name;
      if (!found) {
        fail(path, fmt::format("required property {:?} is not listed in 'properties'", name));
      }
    }
    // Additional members: only when additionalProperties is true or a schema (vLLM's strict
    // default generates none).
    std::optional<Sequence> additional;
    if (s.contains("additionalProperties")) {
      const json& a = s.at("additionalProperties");
      if (a.is_boolean()) {
        if (a.get<bool>()) additional = Sequence{b_.rule(value_rule())};
      } else {
        additional = compile(a, path + "/additionalProperties", depth + 1);
      }
    } else if (members.empty()) {
      additional = Sequence{b_.rule(value_rule())};  // {"type": "object"}: any object
    }
    if (members.empty()) {
      if (additional) return object_of(*additional);
      Sequence out = b_.literal("{");
      append(out, ws());
      append(out, b_.literal("}"));
      return out;
    }
    // rest_first[i] / rest_after[i]: members i.. with nothing / something already written.
    Item first_tail{}, after_tail{};
    {
      const uint32_t first = b_.new_rule("members_end");
      const uint32_t after = b_.new_rule("members_end");
      if (additional) {
        Sequence member = {b_.rule(string_rule())};
        append(member, colon());
        append(member, *additional);
        Sequence more = comma();
        append(more, member);
        const Item more_star = b_.star(more);
        Sequence f = member;
        f.push_back(more_star);
        b_.add_alternative(first, std::move(f));
        b_.add_alternative(first, {});
        b_.add_alternative(after, {more_star});
      } else {
        b_.add_alternative(first, {});
        b_.add_alternative(after, {});
      }
      first_tail = b_.rule(first);
      after_tail = b_.rule(after);
    }
    for (size_t k = members.size(); k-- > 0;) {
      const uint32_t first = b_.new_rule("members");
      const uint32_t after = b_.new_rule("members");
      Sequence f = members[k].second;
      f.push_back(after_tail);
      Sequence a = comma();
      append(a, members[k].second);
      a.push_back(after_tail);
      b_.add_alternative(first, std::move(f));
      b_.add_alternative(after, std::move(a));
      if (!is_required[k]) {
        b_.add_alternative(first, {first_tail});
        b_.add_alternative(after, {after_tail});
      }
      first_tail = b_.rule(first);
      after_tail = b_.rule(after);
    }
    Sequence out = b_.literal("{");
    append(out, ws());
    out.push_back(first_tail);
    append(out, ws());
    append(out, b_.literal("}"));
    return out;
  }

  GrammarBuilder& b_;
  const json& root_;
  JsonGrammarOptions options_;
  std::map<std::string, uint32_t> refs_;
  uint32_t ws_ = UINT32_MAX;
  uint32_t char_ = UINT32_MAX;
  uint32_t string_ = UINT32_MAX;
  uint32_t integer_ = UINT32_MAX;
  uint32_t number_ = UINT32_MAX;
  uint32_t value_ = UINT32_MAX;
  uint32_t object_any_ = UINT32_MAX;
  uint32_t array_any_ = UINT32_MAX;
};

}  // namespace

uint32_t compile_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                             const JsonGrammarOptions& options) {
  return SchemaCompiler(builder, schema, options).compile_root();
}

uint32_t compile_json_object(GrammarBuilder& builder, const JsonGrammarOptions& options) {
  const nlohmann::ordered_json empty = nlohmann::ordered_json::object();
  return SchemaCompiler(builder, empty, options).any_object();
}

}  // namespace vellum::structured

#include "structured/json_schema.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <optional>
#include <cstdio>
#include <set>

#include "common/check.h"
#include "structured/json_pieces.h"
#include "structured/json_schema_normalize.h"
#include "structured/json_schema_numbers.h"
#include "structured/regex.h"

namespace vellum::structured {
namespace {

using json = nlohmann::ordered_json;
using Sequence = GrammarBuilder::Sequence;
using Item = GrammarBuilder::Item;

// A format: the regex of the string's characters and the lengths it allows (max -1: unbounded),
// so that minLength / maxLength beside it can be checked as redundant.
struct Format {
  const char* regex;
  int64_t min_length;
  int64_t max_length;
};

const std::map<std::string, Format> kFormats = {
    {"date", {R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))", 10, 10}},
    {"time", {R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))", 9, 21}},
    {"date-time",
     {R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))",
      20, 32}},
    {"uuid", {R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})", 36, 36}},
    {"email", {R"([A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(\.[A-Za-z0-9\-]{1,63}){1,8})", 5, -1}},
    {"ipv4", {R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))", 7, 15}},
    {"ipv6",
     {R"(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:(:[0-9a-fA-F]{1,4}){1,6}|:((:[0-9a-fA-F]{1,4}){1,7}|:))",
      2, 39}},
    {"uri", {R"([a-zA-Z][a-zA-Z0-9+.\-]{0,31}:[^\s"\\<>]{1,2048})", 2, -1}},
};

// Object member chains larger than this (members x counted sizes) are refused.
constexpr size_t kMaxObjectStates = 20000;

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const json& root, const JsonGrammarOptions& options)
      : b_(b),
        root_(root),
        options_(options),
        pieces_(b, options.any_whitespace),
        normalizer_(root, options.ignore_unenforceable) {}

  uint32_t compile_root() {
    const uint32_t rule = b_.new_rule("root");
    std::optional<Sequence> body = compile(root_, "#", 0);
    if (!body) fail("#", "the schema matches nothing (`false`, or contradictory keywords)");
    b_.add_alternative(rule, std::move(*body));
    if (options_.warnings != nullptr) {
      for (const std::string& w : normalizer_.warnings()) options_.warnings->push_back(w);
    }
    return rule;
  }

  uint32_t any_object() { return pieces_.object_any_rule(); }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "JSON schema at '{}': {}", path, what);
  }

  // The grammar of `s`; nullopt when it matches nothing.
  std::optional<Sequence> compile(const json& s, const std::string& path, int depth) {
    if (depth > b_.limits().max_nesting) {
      fail(path, fmt::format("schemas nest deeper than {}", b_.limits().max_nesting));
    }
    std::vector<Sequence> alternatives;
    for (const json* alternative : normalizer_.alternatives(s, path)) {
      if (alternative->contains("$ref")) {
        if (auto rule = resolve_ref(alternative->at("$ref"), path, depth)) {
          alternatives.push_back({b_.rule(*rule)});
        }
      } else if (auto body = compile_flat(*alternative, path, depth)) {
        alternatives.push_back(std::move(*body));
      }
    }
    if (alternatives.empty()) return std::nullopt;
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    return Sequence{b_.choice("anyOf", std::move(alternatives))};
  }

  std::optional<uint32_t> resolve_ref(const json& ref_value, const std::string& path, int depth) {
    if (!ref_value.is_string()) fail(path, "'$ref' must be a string");
    const std::string ref = ref_value.get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    const json& target = normalizer_.resolve(ref, path);
    const uint32_t rule = b_.new_rule(ref);
    refs_.emplace(ref, rule);  // before compiling: the target may refer back to itself
    std::optional<Sequence> body = compile(target, normalizer_.path_of(ref, path), depth + 1);
    if (!body) {
      // Matches nothing: callers drop it (a reference made while compiling it stays dead).
      refs_[ref] = std::nullopt;
      b_.add_alternative(rule, {b_.bytes(ByteSet{})});
      return std::nullopt;
    }
    b_.add_alternative(rule, std::move(*body));
    return rule;
  }

  // The types `s` admits, from `type` or else from its keywords.
  std::vector<std::string> types_of(const json& s, const std::string& path) const {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s.at("type");
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array()) {
        for (const json& x : t) {
          if (!x.is_string()) fail(path, "'type' must be a string or a list of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(path, "'type' must be a string or a list of strings");
      }
      const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
      if (has_number) std::erase(types, std::string("integer"));  // numbers include integers
      return types;
    }
    auto has_any = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys) {
        if (s.contains(k)) return true;
      }
      return false;
    };
    const bool object = has_any({"properties", "required", "additionalProperties",
                                 "patternProperties", "propertyNames", "minProperties",
                                 "maxProperties"});
    const bool array = has_any({"items", "prefixItems", "minItems", "maxItems"});
    const bool string = has_any({"pattern", "format", "minLength", "maxLength"});
    const bool number = has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                 "multipleOf"});
    if (!object && !array && !string && !number) return {};  // any value
    if (options_.spec_defaults) return {"object", "array", "string", "number", "boolean", "null"};
    if (object) types.push_back("object");
    if (array) types.push_back("array");
    if (string) types.push_back("string");
    if (number) types.push_back("number");
    return types;
  }

  static bool has_type(const json& v, const std::string& type) {
    if (type == "integer") {
      return v.is_number_integer() ||
             (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
    }
    return (type == "string" && v.is_string()) || (type == "number" && v.is_number()) ||
           (type == "boolean" && v.is_boolean()) || (type == "null" && v.is_null()) ||
           (type == "array" && v.is_array()) || (type == "object" && v.is_object());
  }

  std::optional<Sequence> compile_flat(const json& s, const std::string& path, int depth) {
    const std::vector<std::string> types = types_of(s, path);
    if (s.contains("const") || s.contains("enum")) return compile_values(s, types, path);
    if (types.empty()) return Sequence{b_.rule(pieces_.value_rule())};
    std::vector<Sequence> alternatives;
    for (const std::string& t : types) {
      if (auto body = compile_type(t, s, path, depth)) alternatives.push_back(std::move(*body));
    }
    if (alternatives.empty()) return std::nullopt;
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    return Sequence{b_.choice("types", std::move(alternatives))};
  }

  // const / enum: the listed values of an admitted type.
  std::optional<Sequence> compile_values(const json& s, const std::vector<std::string>& types,
                                         const std::string& path) {
    json values = json::array();
    if (s.contains("const")) {
      values.push_back(s.at("const"));
    } else {
      if (!s.at("enum").is_array()) fail(path, "'enum' must be an array");
      values = s.at("enum");
    }
    if (s.contains("const") && s.contains("enum") &&
        std::find(s.at("enum").begin(), s.at("enum").end(), s.at("const")) == s.at("enum").end()) {
      return std::nullopt;
    }
    std::vector<Sequence> alternatives;
    for (const json& v : values) {
      bool admitted = types.empty();
      for (const std::string& t : types) admitted = admitted || has_type(v, t);
      if (admitted) alternatives.push_back(pieces_.literal(v));
    }
    if (alternatives.empty()) return std::nullopt;
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    return Sequence{b_.choice("enum", std::move(alternatives))};
  }

  std::optional<Sequence> compile_type(const std::string& type, const json& s,
                                       const std::string& path, int depth) {
    if (type == "string") return compile_string(s, path);
    if (type == "integer") return compile_integer(s, path);
    if (type == "number") return compile_number(s, path);
    if (type == "boolean") {
      return Sequence{b_.choice("boolean", {b_.literal("true"), b_.literal("false")})};
    }
    if (type == "null") return b_.literal("null");
    if (type == "array") return compile_array(s, path, depth);
    if (type == "object") return compile_object(s, path, depth);
    fail(path, fmt::format("unknown type {:?}; use string, integer, number, boolean, null, "
                           "array or object",
                           type));
  }

  int64_t count_keyword(const json& s, const char* key, const std::string& path) const {
    const json& v = s.at(key);
    const bool integral = v.is_number_integer() ||
                          (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
    if (!integral || v.get<double>() < 0) {
      fail(path, fmt::format("'{}' must be a non-negative integer", key));
    }
    const int64_t n = static_cast<int64_t>(v.get<double>());
    if (n > b_.limits().max_repetition) {
      fail(path, fmt::format("'{}' of {} is larger than the supported {}", key, n,
                             b_.limits().max_repetition));
    }
    return n;
  }

  // --- numbers -----------------------------------------------------------------------------

  std::optional<DecimalBound> bound(const json& s, const char* key, bool inclusive,
                                    const std::string& path) const {
    if (!s.contains(key)) return std::nullopt;
    const json& v = s.at(key);
    if (!v.is_number()) fail(path, fmt::format("'{}' must be a number", key));
    auto parsed = parse_decimal_bound(v.dump(), inclusive);
    if (!parsed) {
      fail(path, fmt::format("'{}' of {} is not supported: bounds must be plain decimals with at "
                             "most {} fraction digits",
                             key, v.dump(), kMaxFractionDigits));
    }
    return parsed;
  }

  NumericBounds bounds_of(const json& s, const std::string& path) const {
    NumericBounds out;
    // Of an inclusive and an exclusive bound on one side, the stricter one applies.
    auto pick = [&](const char* inclusive, const char* exclusive, bool lower) {
      std::optional<DecimalBound> a = bound(s, inclusive, true, path);
      std::optional<DecimalBound> b = bound(s, exclusive, false, path);
      if (!a || !b) return a ? a : b;
      const double va = s.at(inclusive).get<double>();
      const double vb = s.at(exclusive).get<double>();
      if (lower) return vb >= va ? b : a;
      return vb <= va ? b : a;
    };
    out.lower = pick("minimum", "exclusiveMinimum", true);
    out.upper = pick("maximum", "exclusiveMaximum", false);
    return out;
  }

  std::optional<Sequence> from_regex(const std::string& regex, const std::string& path) {
    if (regex.empty()) return std::nullopt;
    try {
      return compile_regex(b_, regex);
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }

  // multipleOf as an integer divisor (1: integers), or as 10^-digits (returned negated); 0 when
  // absent.
  int64_t multiple_of(const json& s, const std::string& path) const {
    if (!s.contains("multipleOf")) return 0;
    const json& v = s.at("multipleOf");
    if (!v.is_number() || v.get<double>() <= 0) fail(path, "'multipleOf' must be a positive number");
    const std::optional<DecimalBound> d = parse_decimal_bound(v.dump(), true);
    if (d && d->fraction_digits.empty() && d->integer_digits.size() <= 5) {
      const int64_t divisor = std::stoll(d->integer_digits);
      if (divisor <= kMaxMultipleOfDivisor) return divisor;
    }
    if (d && d->integer_digits == "0" && !d->fraction_digits.empty() &&
        d->fraction_digits.back() == '1' &&
        d->fraction_digits.find_first_not_of('0') == d->fraction_digits.size() - 1) {
      return -static_cast<int64_t>(d->fraction_digits.size());
    }
    fail(path, fmt::format("'multipleOf' {} is not supported: use an integer up to {} or a power "
                           "of ten such as 0.01",
                           v.dump(), kMaxMultipleOfDivisor));
  }

  std::optional<Sequence> compile_integer(const json& s, const std::string& path) {
    const NumericBounds bounds = bounds_of(s, path);
    const bool bounded = bounds.lower || bounds.upper;
    const int64_t multiple = multiple_of(s, path);
    if (multiple > 1) {
      if (!bounded) return integer_multiples(b_, multiple);
      return compile_bounded_multiples(bounds, multiple, path);
    }
    // A fractional multipleOf such as 0.01 divides every integer.
    if (!bounded) return Sequence{b_.rule(pieces_.integer_rule())};
    return from_regex(integer_range_regex(bounds), path);
  }

  // Integers in a range that are multiples of `divisor`, listed (small ranges only).
  std::optional<Sequence> compile_bounded_multiples(const NumericBounds& bounds, int64_t divisor,
                                                    const std::string& path) {
    const auto range = integer_bounds(bounds);
    if (!range) return std::nullopt;
    const auto [lo, hi] = *range;
    if ((hi / divisor) - (lo / divisor) > kMaxEnumeratedMultiples) {
      fail(path, fmt::format("'multipleOf' {} over a range of more than {} multiples is not "
                             "supported; give minimum and maximum closer together",
                             divisor, kMaxEnumeratedMultiples));
    }
    std::vector<Sequence> alternatives;
    for (int64_t v = (lo / divisor) * divisor; v <= hi; v += divisor) {
      if (v >= lo) alternatives.push_back(b_.literal(std::to_string(v)));
    }
    if (alternatives.empty()) return std::nullopt;
    return Sequence{b_.choice("multiples", std::move(alternatives))};
  }

  std::optional<Sequence> compile_number(const json& s, const std::string& path) {
    const NumericBounds bounds = bounds_of(s, path);
    const int64_t multiple = multiple_of(s, path);
    if (multiple >= 1) return compile_integer(s, path);
    if (!bounds.lower && !bounds.upper && multiple == 0) return Sequence{b_.rule(pieces_.number_rule())};
    const int fraction_digits = multiple < 0 ? static_cast<int>(-multiple) : kMaxFractionDigits;
    try {
      return from_regex(number_range_regex(bounds, fraction_digits), path);
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }

  // --- strings -----------------------------------------------------------------------------

  // The pattern as a full-match regex: as written in strict mode; in spec mode, searched for
  // (what is not anchored with ^ / $ may have any characters around it).
  std::string pattern_regex(const std::string& pattern, const std::string& path) const {
    if (!options_.spec_defaults) return pattern;
    const bool starts = !pattern.empty() && pattern.front() == '^';
    size_t backslashes = 0;
    for (size_t i = pattern.size() - 1; i > 0 && pattern[i - 1] == '\\'; --i) ++backslashes;
    const bool ends = pattern.size() > 1 && pattern.back() == '$' && backslashes % 2 == 0;
    if (starts && ends) return pattern;
    std::string core = pattern.substr(starts ? 1 : 0);
    if (ends) core.pop_back();
    if (has_top_level_alternation(core) && (starts || ends)) {
      fail(path, fmt::format("'pattern' {:?} anchors only some of its alternatives; write "
                             "^(?:...)$ around them",
                             pattern));
    }
    return std::string(starts ? "" : "[\\s\\S]*") + "(?:" + core + ")" + (ends ? "" : "[\\s\\S]*");
  }

  static bool has_top_level_alternation(const std::string& regex) {
    int depth = 0;
    bool in_class = false;
    for (size_t i = 0; i < regex.size(); ++i) {
      const char c = regex[i];
      if (c == '\\') {
        ++i;
      } else if (in_class) {
        in_class = c != ']';
      } else if (c == '[') {
        in_class = true;
      } else if (c == '(') {
        ++depth;
      } else if (c == ')') {
        --depth;
      } else if (c == '|' && depth == 0) {
        return true;
      }
    }
    return false;
  }

  // ^ATOM QUANT$ with ATOM one character class ([...], \\d, \\w, \\s, .) and QUANT one of
  // nothing, *, +, {n}, {n,}, {n,m}: the same with its repetition narrowed to [min, max].
  static std::optional<std::string> narrow_simple_pattern(const std::string& pattern, int64_t min,
                                                          int64_t max) {
    size_t pos = pattern.starts_with("^") ? 1 : 0;
    const size_t atom_start = pos;
    if (pos < pattern.size() && pattern[pos] == '[') {
      for (++pos; pos < pattern.size() && pattern[pos] != ']'; ++pos) {
        if (pattern[pos] == '\\') ++pos;
      }
      if (pos >= pattern.size()) return std::nullopt;
      ++pos;
    } else if (pattern.compare(pos, 1, ".") == 0) {
      ++pos;
    } else if (pos + 1 < pattern.size() && pattern[pos] == '\\' &&
               std::string("dwsDWS").find(pattern[pos + 1]) != std::string::npos) {
      pos += 2;
    } else {
      return std::nullopt;
    }
    const std::string atom = pattern.substr(atom_start, pos - atom_start);
    std::string quantifier = pattern.substr(pos);
    if (quantifier.ends_with("$")) quantifier.pop_back();
    int64_t lo = 1;
    int64_t hi = 1;
    if (quantifier == "*" || quantifier == "+") {
      lo = quantifier == "*" ? 0 : 1;
      hi = -1;
    } else if (!quantifier.empty()) {
      int64_t first = -1;
      int64_t second = -1;
      char close = 0;
      char comma = 0;
      if (std::sscanf(quantifier.c_str(), "{%ld%c", &first, &comma) == 2 && comma == '}') {
        lo = hi = first;
      } else if (std::sscanf(quantifier.c_str(), "{%ld,%ld%c", &first, &second, &close) == 3 &&
                 close == '}') {
        lo = first;
        hi = second;
      } else if (quantifier.size() > 3 && quantifier.ends_with(",}") &&
                 std::sscanf(quantifier.c_str(), "{%ld,", &first) == 1) {
        lo = first;
        hi = -1;
      } else {
        return std::nullopt;
      }
    }
    lo = std::max(lo, min);
    if (max >= 0) hi = hi < 0 ? max : std::min(hi, max);
    if (hi >= 0 && hi < lo) return "";  // no length fits both
    return fmt::format("{}{{{},{}}}", atom, lo, hi < 0 ? "" : std::to_string(hi));
  }

  std::optional<Sequence> compile_string(const json& s, const std::string& path) {
    const bool has_length = s.contains("minLength") || s.contains("maxLength");
    const int64_t min = s.contains("minLength") ? count_keyword(s, "minLength", path) : 0;
    const int64_t max = s.contains("maxLength") ? count_keyword(s, "maxLength", path) : -1;
    if (max >= 0 && max < min) return std::nullopt;
    const Format* format = nullptr;
    if (s.contains("format") && s.at("format").is_string()) {
      // Formats not listed are annotations (JSON Schema 2019-09 and later; optional before).
      if (auto it = kFormats.find(s.at("format").get<std::string>()); it != kFormats.end()) {
        format = &it->second;
      }
    }
    std::optional<std::string> regex;
    if (s.contains("pattern")) {
      if (!s.at("pattern").is_string()) fail(path, "'pattern' must be a string");
      if (format != nullptr) {
        fail(path, "'pattern' together with 'format' is not supported; keep one of them");
      }
      const std::string pattern = s.at("pattern").get<std::string>();
      regex = pattern_regex(pattern, path);
      if (has_length) {
        const bool anchored = !options_.spec_defaults ||
                              (pattern.front() == '^' && pattern.back() == '$');
        regex = anchored ? narrow_simple_pattern(pattern, min, max) : std::nullopt;
        if (regex && regex->empty()) return std::nullopt;
        if (!regex) {
          fail(path, "'minLength' / 'maxLength' together with a 'pattern' are supported only for "
                     "a pattern of one repeated character class (^[a-z]+$); move the length "
                     "into the pattern's {m,n}");
        }
      }
    } else if (format != nullptr) {
      regex = format->regex;
      const bool redundant = min <= format->min_length &&
                             (max < 0 || (format->max_length >= 0 && format->max_length <= max));
      if (has_length && !redundant) {
        fail(path, fmt::format("'minLength' / 'maxLength' together with format {} are not "
                               "supported; use a 'pattern' instead",
                               s.at("format").dump()));
      }
    }
    Sequence out = b_.literal("\"");
    if (regex) {
      try {
        append(out, compile_regex(b_, *regex, RegexOptions{true}));
      } catch (const Error& e) {
        fail(path, e.what());
      }
    } else {
      if (min == 0 && max < 0) return Sequence{b_.rule(pieces_.string_rule())};
      append(out, b_.repeat({pieces_.string_char()}, min, max));
    }
    append(out, b_.literal("\""));
    return out;
  }

  // --- arrays ------------------------------------------------------------------------------

  std::optional<Sequence> compile_array(const json& s, const std::string& path, int depth) {
    int64_t min = s.contains("minItems") ? count_keyword(s, "minItems", path) : 0;
    int64_t max = s.contains("maxItems") ? count_keyword(s, "maxItems", path) : -1;
    std::vector<Sequence> prefix;
    if (s.contains("prefixItems")) {
      const json& list = s.at("prefixItems");
      if (!list.is_array()) fail(path, "'prefixItems' must be a list of schemas");
      for (size_t i = 0; i < list.size(); ++i) {
        std::optional<Sequence> item = compile(list[i], fmt::format("{}/prefixItems/{}", path, i), depth + 1);
        if (!item) {  // nothing can stand at position i: the array ends before it
          max = max < 0 ? static_cast<int64_t>(i) : std::min<int64_t>(max, static_cast<int64_t>(i));
          break;
        }
        prefix.push_back(std::move(*item));
      }
    }
    std::optional<Sequence> rest = Sequence{b_.rule(pieces_.value_rule())};
    if (s.contains("items")) rest = compile(s.at("items"), path + "/items", depth + 1);
    if (!rest) {
      const auto num_prefix = static_cast<int64_t>(prefix.size());
      max = max < 0 ? num_prefix : std::min(max, num_prefix);
    }
    if (max >= 0 && max < min) return std::nullopt;
    if (prefix.empty()) {
      if (max == 0) return pieces_.array_of({}, 0, 0);
      return pieces_.array_of(*rest, min, max);
    }
    // tail(i): the items from position i on, after at least one.
    std::optional<Item> tail;
    {
      const uint32_t rule = b_.new_rule("array_rest");
      const auto num_prefix = static_cast<int64_t>(prefix.size());
      if (rest && (max < 0 || max > num_prefix)) {
        Sequence more = pieces_.comma();
        append(more, *rest);
        b_.add_alternative(rule, b_.repeat(more, std::max<int64_t>(min - num_prefix, 0),
                                           max < 0 ? -1 : max - num_prefix));
      } else if (min <= num_prefix) {
        b_.add_alternative(rule, {});
      }
      tail = b_.rule(rule);
    }
    for (auto i = static_cast<int64_t>(prefix.size()) - 1; i >= 1; --i) {
      const uint32_t rule = b_.new_rule("array_items");
      Sequence with_item = pieces_.comma();
      append(with_item, prefix[static_cast<size_t>(i)]);
      with_item.push_back(*tail);
      if (max < 0 || i < max) b_.add_alternative(rule, std::move(with_item));
      if (i >= min) b_.add_alternative(rule, {});
      tail = b_.rule(rule);
    }
    Sequence items = prefix[0];
    items.push_back(*tail);
    Sequence out = b_.literal("[");
    append(out, pieces_.ws());
    if (min == 0) {
      out.push_back(b_.optional(items));
    } else {
      append(out, items);
    }
    append(out, pieces_.ws());
    append(out, b_.literal("]"));
    return out;
  }

  // --- objects -----------------------------------------------------------------------------

  struct Member {
    std::string name;
    std::optional<Sequence> key_value;  // nullopt: the property may not appear
    bool required = false;
  };

  // The member forms beyond the listed properties ("key": value), or nullopt when none.
  // `declared`: the listed properties, which an additional member may not repeat.
  std::optional<Sequence> additional_member(const json& s, const std::vector<std::string>& declared,
                                            const std::string& path, int depth) {
    std::vector<Sequence> forms;
    if (s.contains("patternProperties")) {
      if (!s.at("patternProperties").is_object()) fail(path, "'patternProperties' must be an object");
      for (const auto& [pattern, schema] : s.at("patternProperties").items()) {
        const std::string at = path + "/patternProperties/" + pattern;
        std::optional<Sequence> value = compile(schema, at, depth + 1);
        if (!value) continue;
        Sequence form = b_.literal("\"");
        try {
          append(form, compile_regex(b_, pattern_regex(pattern, at), RegexOptions{true}));
        } catch (const Error& e) {
          fail(at, e.what());
        }
        append(form, b_.literal("\""));
        append(form, pieces_.colon());
        append(form, *value);
        forms.push_back(std::move(form));
      }
    }
    std::optional<Sequence> value;
    if (s.contains("additionalProperties")) {
      value = compile(s.at("additionalProperties"), path + "/additionalProperties", depth + 1);
    } else if (options_.spec_defaults ||
               (!s.contains("properties") && !s.contains("patternProperties"))) {
      value = Sequence{b_.rule(pieces_.value_rule())};  // {"type": "object"}: any members
    }
    if (value) {
      Sequence form = property_name(s, declared, path, depth);
      append(form, pieces_.colon());
      append(form, *value);
      forms.push_back(std::move(form));
    }
    if (forms.empty()) return std::nullopt;
    if (forms.size() == 1) return std::move(forms[0]);
    return Sequence{b_.choice("member", std::move(forms))};
  }

  Sequence property_name(const json& s, const std::vector<std::string>& declared,
                         const std::string& path, int depth) {
    if (!s.contains("propertyNames")) return pieces_.string_not_in(declared);
    // Kept: the normalizer may link to it for as long as the compilation runs.
    const json& as_string = made_.emplace_back(
        json{{"allOf", json::array({s.at("propertyNames"), {{"type", "string"}}})}});
    std::optional<Sequence> name = compile(as_string, path + "/propertyNames", depth + 1);
    if (!name) fail(path, "'propertyNames' admits no string");
    return *name;
  }

  std::optional<Sequence> compile_object(const json& s, const std::string& path, int depth) {
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s.at("required");
      if (!r.is_array()) fail(path, "'required' must be a list of property names");
      for (const json& name : r) {
        if (!name.is_string()) fail(path, "'required' must be a list of property names");
        required.insert(name.get<std::string>());
      }
    }
    std::vector<Member> members;
    if (s.contains("properties")) {
      const json& props = s.at("properties");
      if (!props.is_object()) fail(path, "'properties' must be an object");
      for (const auto& [name, schema] : props.items()) {
        members.push_back(member(name, compile(schema, path + "/properties/" + name, depth + 1),
                                 required.contains(name)));
      }
    }
    std::vector<std::string> declared;
    for (const Member& m : members) declared.push_back(m.name);
    for (const std::string& name : required) declared.push_back(name);
    std::optional<Sequence> additional = additional_member(s, declared, path, depth);
    // A required property that is not listed takes the additional properties' value schema.
    for (const std::string& name : required) {
      bool listed = false;
      for (const Member& m : members) listed = listed || m.name == name;
      if (listed) continue;
      std::optional<Sequence> value = Sequence{b_.rule(pieces_.value_rule())};
      if (s.contains("additionalProperties")) {
        value = compile(s.at("additionalProperties"), path + "/additionalProperties", depth + 1);
      }
      members.push_back(member(name, std::move(value), true));
    }
    for (const Member& m : members) {
      if (m.required && !m.key_value) return std::nullopt;
    }
    const int64_t min = s.contains("minProperties") ? count_keyword(s, "minProperties", path) : 0;
    const int64_t max = s.contains("maxProperties") ? count_keyword(s, "maxProperties", path) : -1;
    if (max >= 0 && max < min) return std::nullopt;
    ObjectChain chain{members, additional, min, max, max >= 0 ? max : std::max<int64_t>(min, 1),
                      {}, {}, {}};
    if (members.size() * static_cast<size_t>(chain.cap + 1) > kMaxObjectStates) {
      fail(path, fmt::format("minProperties / maxProperties of {} over {} properties is more than "
                             "supported",
                             chain.cap, members.size()));
    }
    std::optional<Item> body =
        options_.spec_defaults ? unordered_tail(chain, 0, 0) : object_tail(chain, 0, 0);
    if (!body) return std::nullopt;
    Sequence out = b_.literal("{");
    append(out, pieces_.ws());
    out.push_back(*body);
    append(out, pieces_.ws());
    append(out, b_.literal("}"));
    return out;
  }

  Member member(const std::string& name, std::optional<Sequence> value, bool is_required) {
    Member m{name, std::nullopt, is_required};
    if (value) {
      Sequence kv = b_.literal(json(name).dump());
      append(kv, pieces_.colon());
      append(kv, *value);
      m.key_value = std::move(kv);
    }
    return m;
  }

  // The members in order, counted: object_tail(k, c) is the rest from member k on after c
  // members (c saturates at `cap` when there is no maxProperties).
  struct ObjectChain {
    const std::vector<Member>& members;
    const std::optional<Sequence>& additional;
    int64_t min;
    int64_t max;  // -1: none
    int64_t cap;
    std::map<std::pair<size_t, int64_t>, std::optional<Item>> memo;
    std::vector<std::optional<Item>> extras;  // unordered_extras(k), made on first use
    std::vector<uint32_t> member_rules;       // member_rule(j), UINT32_MAX until made
  };

  std::optional<Item> object_tail(ObjectChain& chain, size_t k, int64_t count) {
    const auto key = std::make_pair(k, count);
    if (auto it = chain.memo.find(key); it != chain.memo.end()) return it->second;
    // Registered first: with interleaved additional members a rule may refer to itself.
    const uint32_t rule = b_.new_rule("members");
    chain.memo.emplace(key, b_.rule(rule));
    std::vector<Sequence> alternatives;
    if (k == chain.members.size()) {
      const int64_t need = std::max<int64_t>(chain.min - count, 0);
      const int64_t room = chain.max < 0 ? -1 : chain.max - count;
      if (!chain.additional || room == 0) {
        if (need == 0) alternatives.push_back({});
      } else {
        Sequence more = pieces_.comma();
        append(more, *chain.additional);
        if (count > 0) {
          alternatives.push_back(b_.repeat(more, need, room));
        } else {
          Sequence first = *chain.additional;
          append(first, b_.repeat(more, std::max<int64_t>(need - 1, 0), room < 0 ? -1 : room - 1));
          alternatives.push_back(std::move(first));
          if (need == 0) alternatives.push_back({});
        }
      }
    } else {
      const Member& m = chain.members[k];
      const int64_t next = chain.max >= 0 ? count + 1 : std::min(count + 1, chain.cap);
      if (m.key_value && (chain.max < 0 || count < chain.max)) {
        if (auto tail = object_tail(chain, k + 1, next)) {
          Sequence with = count > 0 ? pieces_.comma() : Sequence{};
          append(with, *m.key_value);
          with.push_back(*tail);
          alternatives.push_back(std::move(with));
        }
      }
      if (!m.required) {
        if (auto tail = object_tail(chain, k + 1, count)) alternatives.push_back({*tail});
      }
    }
    if (alternatives.empty()) {
      b_.add_alternative(rule, {b_.bytes(ByteSet{})});  // defined, never matched nor used
      chain.memo[key] = std::nullopt;
      return std::nullopt;
    }
    for (Sequence& alternative : alternatives) b_.add_alternative(rule, std::move(alternative));
    return b_.rule(rule);
  }
  // JSON Schema does not order members. Under its defaults, listed members may come in any order
  // relative to the additional ones, and an optional listed member also after later listed ones
  // (a required one keeps the schema's order). unordered_tail(k, c): the rest when members before
  // k are written or skipped; an out-of-order member j < k is one of the "extras". Which listed
  // member comes next is chosen by its key, so the parse is unambiguous.
  std::optional<Item> unordered_tail(ObjectChain& chain, size_t k, int64_t count) {
    const auto key = std::make_pair(k, count);
    if (auto it = chain.memo.find(key); it != chain.memo.end()) return it->second;
    const uint32_t rule = b_.new_rule("members");
    chain.memo.emplace(key, b_.rule(rule));
    const size_t n = chain.members.size();
    std::vector<Sequence> alternatives;
    bool rest_optional = true;
    for (size_t j = k; j < n; ++j) rest_optional = rest_optional && !chain.members[j].required;
    if (rest_optional && count >= std::min(chain.min, chain.cap)) alternatives.push_back({});
    const int64_t next = chain.max >= 0 ? count + 1 : std::min(count + 1, chain.cap);
    auto then = [&](Item what, std::optional<Item> tail) {
      if (!tail) return;
      Sequence with = count > 0 ? pieces_.comma() : Sequence{};
      with.push_back(what);
      with.push_back(*tail);
      alternatives.push_back(std::move(with));
    };
    if (chain.max < 0 || count < chain.max) {
      if (std::optional<Item> extras = unordered_extras(chain, k)) then(*extras, unordered_tail(chain, k, next));
      for (size_t j = k; j < n; ++j) {
        const Member& m = chain.members[j];
        if (m.key_value) then(member_rule(chain, j), unordered_tail(chain, j + 1, next));
        if (m.required) break;  // it cannot be skipped
      }
    }
    if (alternatives.empty()) {
      b_.add_alternative(rule, {b_.bytes(ByteSet{})});  // defined, never matched nor used
      chain.memo[key] = std::nullopt;
      return std::nullopt;
    }
    for (Sequence& alternative : alternatives) b_.add_alternative(rule, std::move(alternative));
    return b_.rule(rule);
  }

  Item member_rule(ObjectChain& chain, size_t j) {
    if (chain.member_rules.empty()) chain.member_rules.resize(chain.members.size(), UINT32_MAX);
    if (chain.member_rules[j] == UINT32_MAX) {
      chain.member_rules[j] = b_.new_rule("member");
      b_.add_alternative(chain.member_rules[j], *chain.members[j].key_value);
    }
    return b_.rule(chain.member_rules[j]);
  }

  // The members that may come before listed member k: additional ones, and the optional listed
  // members before k.
  std::optional<Item> unordered_extras(ObjectChain& chain, size_t k) {
    if (chain.extras.empty()) {
      chain.extras.resize(chain.members.size() + 1);
      if (chain.additional) chain.extras[0] = b_.choice("extra", {*chain.additional});
      for (size_t j = 0; j < chain.members.size(); ++j) {
        const Member& m = chain.members[j];
        std::vector<Sequence> forms;
        if (chain.extras[j]) forms.push_back({*chain.extras[j]});
        if (!m.required && m.key_value) forms.push_back({member_rule(chain, j)});
        if (!forms.empty()) chain.extras[j + 1] = b_.choice("extra", std::move(forms));
      }
    }
    return chain.extras[k];
  }


  GrammarBuilder& b_;
  const json& root_;
  JsonGrammarOptions options_;
  JsonPieces pieces_;
  SchemaNormalizer normalizer_;
  std::map<std::string, std::optional<uint32_t>> refs_;  // nullopt: matches nothing
  std::deque<json> made_;  // schemas made here (stable addresses)
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

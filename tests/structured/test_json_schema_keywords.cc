// The keyword policy, keyword by keyword: for each enforced keyword, documents the grammar must
// accept and documents it must reject (driven through the automaton byte by byte, and through
// the token masks of a synthetic vocabulary); annotations and unknown keywords ignored;
// unenforceable keywords refused, or accepted with a warning when asked.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "structured/json_schema_numbers.h"
#include "structured_test_util.h"
#include "vellum/status.h"

namespace vellum::structured {
namespace {

using testing::full_match;
using testing::schema_spec;

struct Case {
  const char* schema;
  std::vector<const char*> accepted;
  std::vector<const char*> rejected;
  bool spec_defaults = false;
};

// True when the token masks allow `text` token by token (one token per byte here, plus the end).
bool mask_walk_accepts(const std::shared_ptr<CompiledGrammar>& grammar, const std::string& text) {
  Matcher matcher(grammar);
  std::vector<int32_t> output;
  for (unsigned char c : text) {
    matcher.sync(output);
    const auto mask = matcher.mask();
    const int32_t id = c;  // synthetic_vocab(): token c is the byte c
    if (!((mask[static_cast<size_t>(id >> 6)] >> (id & 63)) & 1)) return false;
    output.push_back(id);
  }
  matcher.sync(output);
  return (matcher.mask()[0] & 1) != 0;  // token 0 is the end token
}

void check(const Case& c) {
  SCOPED_TRACE(c.schema);
  ConstraintSpec spec = schema_spec(c.schema);
  spec.spec_defaults = c.spec_defaults;
  Automaton automaton(compile_constraint(spec), GrammarLimits{});
  GrammarCache cache(testing::synthetic_vocab());
  auto grammar = cache.get(spec);
  for (const char* doc : c.accepted) {
    EXPECT_TRUE(full_match(automaton, doc)) << "should accept " << doc;
    EXPECT_TRUE(mask_walk_accepts(grammar, doc)) << "masks should allow " << doc;
  }
  for (const char* doc : c.rejected) {
    EXPECT_FALSE(full_match(automaton, doc)) << "should reject " << doc;
    EXPECT_FALSE(mask_walk_accepts(grammar, doc)) << "masks should refuse " << doc;
  }
}

TEST(JsonSchemaKeywords, AnnotationsAndUnknownKeywordsAreIgnored) {
  check({R"({"$schema": "http://json-schema.org/draft-04/schema#", "id": "x", "$id": "y",
            "$comment": "c", "title": "t", "description": "d", "examples": [1], "example": 2,
            "default": 3, "readOnly": true, "readonly": true, "writeOnly": false,
            "deprecated": true, "_format": "f", "self": {"vendor": "v"}, "links": [],
            "x-kubernetes-patch-strategy": "merge", "javaType": "Foo", "type": "integer"})",
         {"7", "-2"},
         {"\"7\"", "1.5"}});
}

TEST(JsonSchemaKeywords, PydanticFieldBoundsOnAnInteger) {
  // age: int = Field(ge=0, le=120)
  check({R"({"properties": {"age": {"maximum": 120, "minimum": 0, "title": "Age",
            "type": "integer"}}, "required": ["age"], "title": "Person", "type": "object"})",
         {R"({"age": 0})", R"({"age": 9})", R"({"age": 99})", R"({"age": 100})", R"({"age": 120})"},
         {R"({"age": -1})", R"({"age": 121})", R"({"age": 130})", R"({"age": 1000})",
          R"({"age": 007})", R"({"age": 12.5})"}});
}

TEST(JsonSchemaKeywords, IntegerBoundsMatchBruteForce) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> value(-150, 150);
  for (int trial = 0; trial < 40; ++trial) {
    const int lo = value(rng);
    const int hi = lo + std::uniform_int_distribution<int>(0, 200)(rng);
    const bool lo_exclusive = trial % 3 == 0;
    const bool hi_exclusive = trial % 4 == 0;
    std::string schema = "{\"type\": \"integer\"";
    schema += fmt::format(", \"{}\": {}", lo_exclusive ? "exclusiveMinimum" : "minimum", lo);
    if (trial % 5 != 0) schema += fmt::format(", \"{}\": {}", hi_exclusive ? "exclusiveMaximum" : "maximum", hi);
    schema += "}";
    SCOPED_TRACE(schema);
    Automaton a(compile_constraint(schema_spec(schema)), GrammarLimits{});
    for (int v = -400; v <= 400; ++v) {
      const bool above = lo_exclusive ? v > lo : v >= lo;
      const bool below = trial % 5 == 0 || (hi_exclusive ? v < hi : v <= hi);
      ASSERT_EQ(full_match(a, std::to_string(v)), above && below) << v;
    }
  }
  // Draft 4: boolean exclusiveMinimum / exclusiveMaximum modify minimum / maximum.
  check({R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 10,
            "exclusiveMaximum": false})",
         {"1", "10"},
         {"0", "11", "-1"}});
  // Wide ranges and the digit cap.
  check({R"({"type": "integer", "minimum": -1000000000000, "maximum": 99999999999999})",
         {"-1000000000000", "0", "99999999999999", "123456789"},
         {"-1000000000001", "100000000000000"}});
}

TEST(JsonSchemaKeywords, NumberBoundsMatchBruteForce) {
  const std::vector<std::pair<std::string, std::pair<double, double>>> bounds = {
      {R"("minimum": 0, "maximum": 1)", {0, 1}},
      {R"("minimum": -2.5, "maximum": 3.25)", {-2.5, 3.25}},
      {R"("exclusiveMinimum": 0.5)", {0.5, 1e9}},
      {R"("minimum": -10, "exclusiveMaximum": -0.75)", {-10, -0.75}},
      {R"("minimum": 1.05, "maximum": 7)", {1.05, 7}},
  };
  for (const auto& [keywords, range] : bounds) {
    const std::string schema = "{\"type\": \"number\", " + keywords + "}";
    SCOPED_TRACE(schema);
    Automaton a(compile_constraint(schema_spec(schema)), GrammarLimits{});
    const bool lo_exclusive = keywords.find("exclusiveMinimum") != std::string::npos;
    const bool hi_exclusive = keywords.find("exclusiveMaximum") != std::string::npos;
    for (int hundredths = -1200; hundredths <= 1200; hundredths += 1) {
      const double v = hundredths / 100.0;
      const bool inside = (lo_exclusive ? v > range.first : v >= range.first) &&
                          (hi_exclusive ? v < range.second : v <= range.second);
      for (const std::string& text : {fmt::format("{:.2f}", v), fmt::format("{}", v)}) {
        ASSERT_EQ(full_match(a, text), inside) << text;
      }
    }
  }
  check({R"({"type": "number", "minimum": 0, "multipleOf": 0.01})",
         {"0", "1.5", "2.25", "100"},
         {"-1", "1.255", "1e3"}});
}

TEST(JsonSchemaKeywords, MultipleOfIntegers) {
  check({R"({"type": "integer", "multipleOf": 7})",
         {"0", "7", "-14", "700", "700000000007"},
         {"1", "-8", "700000000008"}});
  Automaton a(compile_constraint(schema_spec(R"({"type": "integer", "multipleOf": 7})")),
              GrammarLimits{});
  for (int v = -300; v <= 300; ++v) ASSERT_EQ(full_match(a, std::to_string(v)), v % 7 == 0) << v;
  check({R"({"type": "integer", "multipleOf": 5, "minimum": 3, "maximum": 23})",
         {"5", "10", "20"},
         {"0", "3", "25", "7"}});
}

TEST(JsonSchemaKeywords, ObjectKeywords) {
  check({R"({"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
            "additionalProperties": false})",
         {"{}", R"({"x-a": 1, "x-bc": 2})"},
         {R"({"y": 1})", R"({"x-a": "s"})", R"({"x-1": 1})"}});
  check({R"({"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": {"type": "null"}})",
         {"{}", R"({"abc": null})"},
         {R"({"abcd": null})"}});
  check({R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
            "c": {"type": "integer"}}, "minProperties": 1, "maxProperties": 2})",
         {R"({"a": 1})", R"({"b": 1, "c": 2})", R"({"a": 1, "c": 2})"},
         {"{}", R"({"a": 1, "b": 2, "c": 3})"}});
  check({R"({"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}})",
         {R"({"a": 1, "b": 2})", R"({"a": 1, "b": 2, "c": 3})"},
         {"{}", R"({"a": 1})"}});
  check({R"({"type": "object", "properties": {"card": {"type": "string"}, "billing": {"type": "string"}},
            "dependentRequired": {"card": ["billing"]}})",
         {"{}", R"({"billing": "x"})", R"({"card": "1", "billing": "x"})"},
         {R"({"card": "1"})"}});
  check({R"({"type": "object", "properties": {"card": {"type": "string"}, "billing": {"type": "string"}},
            "dependencies": {"card": {"required": ["billing"]}}})",
         {"{}", R"({"card": "1", "billing": "x"})"},
         {R"({"card": "1"})"}});
  // An additional member may not repeat a listed property (which has its own schema).
  check({R"({"type": "object", "properties": {"id": {"type": "integer"}, "n\"é": {"type": "integer"}},
            "additionalProperties": {"type": "string"}})",
         {R"({"id": 1, "idx": "a"})", R"({"i": "a", "": "b"})", R"({"n\"": "a", "né": "b"})"},
         {R"({"idx": "a", "id": "s"})", R"({"id": 1, "id": "s"})", R"({"n\"é": "s"})"}});
  // JSON Schema's own defaults: optional members in any order, extras anywhere, each with its
  // own schema.
  check({R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
            "c": {"type": "string"}}, "required": ["a"]})",
         {R"({"a": 1, "c": "x", "b": 2})", R"({"x": null, "a": 1, "y": [], "c": "s"})", R"({"a": 1})"},
         {R"({"c": "x"})", R"({"a": 1, "c": 2})", R"({"x": 0, "a": 1, "c": "s", "b": "s"})"},
         /*spec_defaults=*/true});
  // JSON Schema's own defaults: additional properties allowed, required ones not listed.
  check({R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]})",
         {R"({"a": 1, "b": [true]})", R"({"b": 0})"},
         {R"({"a": 1})", R"({"a": "s", "b": 0})"},
         /*spec_defaults=*/true});
}

TEST(JsonSchemaKeywords, ArrayKeywords) {
  check({R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": {"type": "boolean"}})",
         {"[]", "[1]", R"([1, "a"])", R"([1, "a", true, false])"},
         {R"(["a"])", R"([1, 2])", R"([1, "a", 3])"}});
  // Draft 4-2019: items as a list, additionalItems for the rest.
  check({R"({"type": "array", "items": [{"const": "x"}, {"type": "null"}], "additionalItems": false,
            "minItems": 1})",
         {R"(["x"])", R"(["x", null])"},
         {"[]", R"(["x", null, null])", R"([null])"}});
  check({R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
         {"[1, 2]", "[1, 2, 3]"},
         {"[1]", "[1, 2, 3, 4]"}});
}

TEST(JsonSchemaKeywords, ConstAndEnumOfAnyValue) {
  check({R"({"const": {"a": [1, {"b": null}], "c": "d"}})",
         {R"({"a": [1, {"b": null}], "c": "d"})", R"({"a":[1,{"b":null}],"c":"d"})",
          "{\n  \"a\": [1, {\"b\": null}],\n  \"c\": \"d\"\n}"},
         {R"({"a": [1], "c": "d"})", R"({"c": "d", "a": [1, {"b": null}]})"}});
  check({R"({"type": "string", "enum": ["a", 1, ["b"], null]})",
         {R"("a")"},
         {"1", R"(["b"])", "null"}});
  check({R"({"enum": ["a", 1, ["b"], null]})",
         {R"("a")", "1", R"(["b"])", "null"},
         {R"("b")", "2"}});
}

TEST(JsonSchemaKeywords, Formats) {
  check({R"({"type": "string", "format": "date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"}});
  check({R"({"type": "string", "format": "time"})", {R"("12:30:00Z")", R"("23:59:59.5+02:00")"}, {R"("24:00:00Z")"}});
  check({R"({"type": "string", "format": "date-time"})", {R"("2024-02-29T12:00:00Z")"}, {R"("2024-02-29 12:00:00")"}});
  check({R"({"type": "string", "format": "email"})", {R"("a.b@c.org")"}, {R"("a.b")", R"("@c.org")"}});
  check({R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}});
  check({R"({"type": "string", "format": "uri"})", {R"("https://example.com/a?b=c")"}, {R"("no scheme")"}});
  check({R"({"type": "string", "format": "ipv4"})", {R"("192.168.0.1")"}, {R"("256.1.1.1")", R"("1.2.3")"}});
  check({R"({"type": "string", "format": "ipv6"})", {R"("::1")", R"("2001:db8::ff00:42:8329")", R"("fe80:0:0:0:0:0:0:1")"},
         {R"("2001:db8:::1")", R"("12345::")"}});
  // A format it does not know is an annotation.
  check({R"({"type": "string", "format": "hostname"})", {R"("anything at all")"}, {"1"}});
  // Lengths that a format already implies are redundant.
  check({R"({"type": "string", "format": "uuid", "maxLength": 36})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {}});
  // A length folded into a one-class pattern.
  check({R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3})", {R"("abc")", R"("a")"}, {R"("abcd")", R"("")"}});
}

TEST(JsonSchemaKeywords, CombinatorsBesideSiblingsAreIntersections) {
  check({R"({"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"],
            "anyOf": [{"properties": {"kind": {"const": "a"}}}, {"properties": {"kind": {"const": "b"}}}]})",
         {R"({"kind": "a"})", R"({"kind": "b"})"},
         {R"({"kind": "c"})", "{}"}});
  check({R"({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 10}, {"multipleOf": 2}]})",
         {"0", "4", "10"},
         {"-2", "3", "12"}});
  check({R"({"type": "string", "oneOf": [{"maxLength": 1}, {"enum": ["long"]}]})",
         {R"("a")", R"("long")"},
         {R"("ab")", "1"}});
}

TEST(JsonSchemaKeywords, RefsToAnyPointerAndRecursion) {
  check({R"({"properties": {"a": {"type": "object", "properties": {"b": {"type": "integer", "maximum": 3}}}},
            "type": "object", "additionalProperties": {"$ref": "#/properties/a/properties/b"}})",
         {R"({"x": 3})", R"({"a": {"b": 1}, "y": 0})"},
         {R"({"x": 4})"},
         /*spec_defaults=*/false});
  check({R"({"definitions": {"a~b/c": {"type": "boolean"}}, "$ref": "#/definitions/a~0b~1c"})",
         {"true"},
         {"1"}});
  // Recursion through an allOf with siblings: the merged schema refers back through a link.
  check({R"({"$defs": {"node": {"type": "object", "properties": {
              "kids": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/node"}, {"required": ["v"]}]}},
              "v": {"type": "integer"}}}},
            "$ref": "#/$defs/node"})",
         {R"({"kids": [{"kids": [{"v": 2}], "v": 1}]})", "{}"},
         {R"({"kids": [{}]})", R"({"kids": [{"kids": [{}], "v": 1}]})"}});
  // Drafts 4-7 ignore keywords beside $ref.
  check({R"({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"i": {"type": "integer"}},
            "$ref": "#/definitions/i", "type": "string"})",
         {"5"},
         {R"("s")"}});
}

TEST(JsonSchemaKeywords, UnenforceableKeywordsAcceptedWithAWarningWhenAsked) {
  ConstraintSpec spec = schema_spec(R"({"type": "array", "items": {"type": "integer"}, "uniqueItems": true})");
  EXPECT_THROW(compile_constraint(spec), Error);
  spec.ignore_unenforceable = true;
  std::vector<std::string> warnings;
  Automaton a(compile_constraint(spec, GrammarLimits{}, &warnings), GrammarLimits{});
  EXPECT_TRUE(full_match(a, "[1, 1]"));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'uniqueItems'"), std::string::npos) << warnings[0];
  // A no-op value is not a warning.
  warnings.clear();
  compile_constraint(schema_spec(R"({"type": "array", "uniqueItems": false})"), GrammarLimits{}, &warnings);
  EXPECT_TRUE(warnings.empty());
}

TEST(JsonSchemaKeywords, PatternSearchesUnderJsonSchemaDefaults) {
  check({R"({"type": "string", "pattern": "[0-9]"})", {R"("a1b")", R"("7")"}, {R"("abc")"}, /*spec_defaults=*/true});
  check({R"({"type": "string", "pattern": "^ab"})", {R"("abc")"}, {R"("cab")"}, /*spec_defaults=*/true});
  check({R"({"type": "string", "pattern": "[0-9]"})", {R"("7")"}, {R"("a1b")"}});  // strict: whole
}

TEST(JsonSchemaNumbers, RegexesOfRanges) {
  NumericBounds b;
  b.lower = parse_decimal_bound("0", true);
  b.upper = parse_decimal_bound("120", true);
  EXPECT_EQ(integer_range_regex(b), "\\d|[1-9]\\d|1(?:[0-1]\\d|20)");
  const auto parsed = parse_decimal_bound("-1.50e1", true);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(parsed->negative);
  EXPECT_EQ(parsed->integer_digits, "15");
  EXPECT_EQ(parsed->fraction_digits, "");
  EXPECT_FALSE(parse_decimal_bound("1e-40", true).has_value());
}

}  // namespace
}  // namespace vellum::structured

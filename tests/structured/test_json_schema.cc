// JSON Schema compilation: accepted and rejected documents, refused keywords, limits, and the
// property test — random walks through the token masks always yield schema-valid JSON.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "json_validator.h"
#include "structured_test_util.h"
#include "vellum/status.h"

namespace vellum::structured {
namespace {

using nlohmann::json;
using testing::full_match;
using testing::schema_spec;

const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 20},
    "age": {"type": "integer"},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
    "married": {"type": ["boolean", "null"]}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";

TEST(JsonSchema, AcceptsValidDocumentsAndRejectsInvalidOnes) {
  Automaton a(compile_constraint(schema_spec(kPerson)), GrammarLimits{});
  EXPECT_TRUE(full_match(a, R"({"name": "Al", "age": 3})"));
  EXPECT_TRUE(full_match(a, R"({"name":"Al","age":-30,"married":null})"));
  EXPECT_TRUE(full_match(a, R"({"name": "Al", "age": 0, "email": "a.b@c.org", "tags": ["a","b"]})"));
  EXPECT_TRUE(full_match(a, "{\n  \"name\": \"\\u00e9\\n\",\n  \"age\": 1\n}"));
  EXPECT_FALSE(full_match(a, R"({"age": 3, "name": "Al"})"));        // the schema's order
  EXPECT_FALSE(full_match(a, R"({"name": "Al"})"));                  // age is required
  EXPECT_FALSE(full_match(a, R"({"name": "", "age": 3})"));          // minLength
  EXPECT_FALSE(full_match(a, R"({"name": "Al", "age": 03})"));       // leading zero
  EXPECT_FALSE(full_match(a, R"({"name": "Al", "age": 3, "x": 1})"));  // additional
  EXPECT_FALSE(full_match(a, R"({"name": "Al", "age": 3, "tags": ["c"]})"));
  EXPECT_FALSE(full_match(a, R"({"name": "Al", "age": 3, "tags": ["a","a","a","a"]})"));
  EXPECT_FALSE(full_match(a, R"({"name": "Al", "age": 3, "email": "nope"})"));
  EXPECT_FALSE(full_match(a, "{\"name\": \"a\x01\", \"age\": 3}"));  // raw control character
}

TEST(JsonSchema, RefsDefsRecursionAnyOfConstAndFormats) {
  const char* tree = R"({
    "$defs": {"node": {"type": "object", "properties": {
       "v": {"type": "number"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
       "required": ["v"]}},
    "$ref": "#/$defs/node"})";
  EXPECT_TRUE(full_match(schema_spec(tree), R"({"v": 1.5e3, "kids": [{"v": 2, "kids": []}]})"));
  EXPECT_FALSE(full_match(schema_spec(tree), R"({"v": 1, "kids": [{"kids": []}]})"));
  const char* any = R"({"anyOf": [{"type": "integer"}, {"const": "x"}, {"enum": [true, null]}]})";
  EXPECT_TRUE(full_match(schema_spec(any), "12"));
  EXPECT_TRUE(full_match(schema_spec(any), "\"x\""));
  EXPECT_TRUE(full_match(schema_spec(any), "null"));
  EXPECT_FALSE(full_match(schema_spec(any), "\"y\""));
  EXPECT_TRUE(full_match(schema_spec(R"({"type": "string", "format": "date-time"})"),
                         "\"2024-02-29T12:00:00Z\""));
  EXPECT_TRUE(full_match(schema_spec(R"({"type": "string", "format": "uuid"})"),
                         "\"123e4567-e89b-12d3-a456-426614174000\""));
  EXPECT_TRUE(full_match(schema_spec(R"({"type": "string", "pattern": "a\"b"})"), R"("a\"b")"));
  EXPECT_TRUE(full_match(schema_spec("{}"), R"([1, {"a": [true]}, "s"])"));
  EXPECT_TRUE(full_match(schema_spec(R"({"type": "object"})"), R"({"k": [null]})"));
  ConstraintSpec object;
  object.kind = ConstraintKind::kJsonObject;
  EXPECT_TRUE(full_match(object, R"({"a": {"b": [1, 2.5, "c"]}})"));
  EXPECT_FALSE(full_match(object, "[1]"));
}

TEST(JsonSchema, CompactWhitespaceMode) {
  ConstraintSpec s = schema_spec(kPerson);
  s.any_whitespace = false;
  EXPECT_TRUE(full_match(s, R"({"name": "Al", "age": 3})"));
  EXPECT_FALSE(full_match(s, R"({"name":"Al","age":3})"));
  EXPECT_FALSE(full_match(s, "{\n\"name\": \"Al\", \"age\": 3}"));
}

TEST(JsonSchema, UnsupportedKeywordsAndBadSchemasNameTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
      {R"({"not": {"type": "string"}})", "'not' cannot be expressed"},
      {R"({"if": {"type": "string"}, "then": {"minLength": 1}})", "'if'"},
      {R"({"type": "strin"})", "unknown type \"strin\""},
      {R"({"$ref": "#/$defs/missing"})", "does not resolve"},
      {R"({"$ref": "http://example.com/s.json"})", "only local references"},
      {R"({"$ref": "#anchor"})", "names an anchor"},
      {R"({"type": "array", "maxItems": 100000000})", "'maxItems'"},
      {R"J({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}})J",
       "#/properties/a"},
      {R"({"type": "object", )", "not valid JSON"},
      {R"(false)", "matches nothing"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "matches nothing"},
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "matches nothing"},
      {R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})", "two different values of 'pattern'"},
      {R"({"type": "integer", "multipleOf": 7, "minimum": 0})", "'multipleOf' 7 over a range"},
      {R"({"type": "number", "multipleOf": 0.3})", "'multipleOf' 0.3"},
      {R"({"type": "string", "pattern": "^[a-z]+-[0-9]+$", "maxLength": 8})", "'maxLength'"},
  };
  for (const auto& [schema, expected] : cases) {
    try {
      compile_constraint(schema_spec(schema));
      ADD_FAILURE() << schema << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << schema << ": " << e.what();
    }
  }
}

TEST(JsonSchema, ADozenPropertySchemaCompilesFast) {
  json schema = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
  const char* types[] = {"string", "integer", "number", "boolean"};
  for (int i = 0; i < 12; ++i) {
    const std::string name = "field_" + std::to_string(i);
    schema["properties"][name] = {{"type", types[i % 4]}};
    if (i % 2 == 0) schema["required"].push_back(name);
  }
  schema["properties"]["when"] = {{"type", "string"}, {"format", "date-time"}};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) compile_constraint(schema_spec(schema.dump()));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      10;
  // The target is < 50 ms; the bound here is loose for slow shared CI machines.
  EXPECT_LT(ms, 500.0);
  std::printf("12-property schema: %.2f ms per compilation\n", ms);
}

TEST(JsonSchema, DeepNestingAndAmbiguityStayBounded) {
  // A schema nested deeper than the limit is refused at compile time.
  json deep = {{"type", "integer"}};
  for (int i = 0; i < 300; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_THROW(compile_constraint(schema_spec(deep.dump())), Error);
  // Output nested deeper than the stack limit is cut, not followed without bound.
  GrammarLimits limits;
  limits.max_stack_depth = 64;
  ConstraintSpec object;
  object.kind = ConstraintKind::kJsonObject;
  Automaton a(compile_constraint(object, limits), limits);
  std::string nested;
  for (int i = 0; i < 200; ++i) nested += "{\"a\":";
  EXPECT_FALSE(full_match(a, nested));
  EXPECT_NE(a.limit_error().find("nests deeper"), std::string::npos) << a.limit_error();
}

TEST(JsonSchemaProperty, RandomWalksThroughMasksYieldValidJson) {
  const std::vector<std::string> schemas = {
      kPerson,
      R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4})",
      R"({"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "number"},
          "s": {"type": "string", "maxLength": 5}}, "required": ["ok"]})",
      R"({"enum": ["red", "green", 3, null]})",
      R"({"type": "object", "properties": {"d": {"type": "string", "format": "date"},
          "id": {"type": "string", "pattern": "[A-Z]{2}-\\d{3}"}}, "required": ["d", "id"]})",
      R"({"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "maxItems": 2,
          "items": {"$ref": "#/$defs/n"}}}}}, "$ref": "#/$defs/n"})",
      R"({"type": "object", "additionalProperties": {"type": "integer"}})",
      R"({"anyOf": [{"type": "string", "minLength": 2, "maxLength": 3}, {"type": "null"}]})",
  };
  auto vocab = testing::synthetic_vocab();
  GrammarCache cache(vocab);
  int num_finished = 0;
  int num_runs = 0;
  for (const std::string& text : schemas) {
    SCOPED_TRACE(text);
    const json schema = json::parse(text);
    auto g = cache.get(schema_spec(text));
    for (uint64_t seed = 0; seed < 25; ++seed) {
      std::mt19937_64 rng(seed);
      const auto [output, finished] = testing::random_generation(g, rng, 400);
      ++num_runs;
      if (!finished) continue;
      ++num_finished;
      json value;
      ASSERT_NO_THROW(value = json::parse(output)) << output;
      std::string why;
      EXPECT_TRUE(testing::validate_json(value, schema, schema, &why)) << output << ": " << why;
    }
  }
  EXPECT_GT(num_finished, num_runs / 2);
}

}  // namespace
}  // namespace vellum::structured

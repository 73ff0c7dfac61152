// Structured-output and tool fields of requests: vLLM's names and precedence, and 400s naming the
// field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "server/structured_request.h"

namespace vellum::server {
namespace {

using json = nlohmann::ordered_json;

SamplingParams parse_ok(const std::string& body) {
  const auto parsed = parse_chat_completion_request(body);
  if (const auto* e = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<ChatCompletionRequest>(parsed).params;
}

ApiError parse_error(const std::string& body) {
  const auto parsed = parse_chat_completion_request(body);
  if (const auto* e = std::get_if<ApiError>(&parsed)) return *e;
  ADD_FAILURE() << "expected an error for " << body;
  return {};
}

constexpr const char* kMessages = R"("messages": [{"role": "user", "content": "hi"}])";

std::string body(const std::string& fields) { return std::string("{") + kMessages + ", " + fields + "}"; }

TEST(StructuredRequest, FieldsMapOntoStructuredOutputsParams) {
  auto p = parse_ok(body(R"("response_format": {"type": "json_schema", "json_schema":
      {"name": "x", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}})"));
  ASSERT_TRUE(p.structured_outputs);
  EXPECT_EQ(*p.structured_outputs->json,
            R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  p = parse_ok(body(R"("response_format": {"type": "json_object"})"));
  ASSERT_TRUE(p.structured_outputs);
  EXPECT_TRUE(p.structured_outputs->json_object);
  p = parse_ok(body(R"("response_format": {"type": "text"})"));
  EXPECT_FALSE(p.structured_outputs);
  p = parse_ok(body(R"("structured_outputs": {"regex": "\\d+", "disable_any_whitespace": true})"));
  EXPECT_EQ(p.structured_outputs->regex, "\\d+");
  EXPECT_TRUE(p.structured_outputs->disable_any_whitespace);
  p = parse_ok(body(R"("structured_outputs": {"choice": ["a", "b"]})"));
  EXPECT_EQ(*p.structured_outputs->choice, (std::vector<std::string>{"a", "b"}));
  p = parse_ok(body(R"("guided_json": "{\"type\": \"string\"}")"));
  EXPECT_EQ(*p.structured_outputs->json, R"({"type":"string"})");
  p = parse_ok(body(R"("guided_grammar": "root ::= \"a\"")"));
  EXPECT_EQ(*p.structured_outputs->grammar, "root ::= \"a\"");
  p = parse_ok(body(R"("guided_choice": ["x"])"));
  EXPECT_EQ(p.structured_outputs->choice->size(), 1u);
  // response_format adds to structured_outputs; two constraints are then rejected by validate().
  p = parse_ok(body(R"("structured_outputs": {"regex": "a"}, "response_format": {"type": "json_object"})"));
  ASSERT_TRUE(p.validate());
  EXPECT_NE(p.validate()->message.find("only use one kind"), std::string::npos);
  // Completions take the same fields.
  const auto completion = parse_completion_request(R"({"prompt": "x", "guided_regex": "[ab]+"})");
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(completion));
  EXPECT_EQ(std::get<CompletionRequest>(completion).params.structured_outputs->regex, "[ab]+");
}

TEST(StructuredRequest, BadFieldsAre400sNamingTheField) {
  struct Case {
    std::string fields;
    std::string param;
    std::string message;
  };
  const Case cases[] = {
      {R"("response_format": {"type": "json_schema"})", "response_format", "json_schema"},
      {R"("response_format": {"type": "yaml"})", "response_format", "unknown"},
      {R"("response_format": "json")", "response_format", "'type'"},
      {R"("guided_json": "{not json")", "guided_json", "not a valid JSON schema"},
      {R"("guided_regex": 3)", "guided_regex", "must be a string"},
      {R"("structured_outputs": {"whitespace_pattern": "\\s"})", "structured_outputs",
       "whitespace_pattern"},
      {R"("structured_outputs": {"json": {}}, "guided_regex": "a")", "structured_outputs",
       "not both"},
      {R"("tool_choice": {"type": "function", "function": {"name": "g"}},
          "tools": [{"type": "function", "function": {"name": "f"}}])",
       "tool_choice", "Tool 'g' has not been passed in `tools`."},
      {R"("tool_choice": "sometimes", "tools": [{"type": "function", "function": {"name": "f"}}])",
       "tool_choice", "must be"},
      {R"("tools": [{"type": "function", "function": {}}])", "tools", "name"},
  };
  for (const Case& c : cases) {
    const ApiError e = parse_error(body(c.fields));
    EXPECT_EQ(e.status, 400) << c.fields;
    EXPECT_EQ(e.param.value_or(""), c.param) << c.fields;
    EXPECT_NE(e.message.find(c.message), std::string::npos) << c.fields << ": " << e.message;
  }
}

TEST(StructuredRequest, ToolChoiceDefaultsAndSchemas) {
  ToolRequest tools;
  ASSERT_FALSE(parse_tool_fields(json::parse(R"({"tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"$ref": "#/$defs/City"}}, "$defs": {"City": {"type": "string"}}}}},
      {"type": "function", "function": {"name": "ping"}}]})"),
                                 tools));
  EXPECT_EQ(tools.choice, "auto");  // tools without tool_choice
  EXPECT_FALSE(tool_choice_schema(tools));
  tools.choice = "required";
  const json required = json::parse(*tool_choice_schema(tools));
  EXPECT_EQ(required["type"], "array");
  EXPECT_EQ(required["minItems"], 1);
  EXPECT_EQ(required["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(required["$defs"]["City"]["type"], "string");  // hoisted to the root
  EXPECT_FALSE(required["items"]["anyOf"][0]["properties"]["parameters"].contains("$defs"));
  tools.choice = "function";
  tools.function_name = "get_weather";
  EXPECT_EQ(json::parse(*tool_choice_schema(tools))["type"], "object");
  ToolRequest none;
  ASSERT_FALSE(parse_tool_fields(json::parse(R"({"messages": []})"), none));
  EXPECT_EQ(none.choice, "none");
}

TEST(StructuredRequest, ParallelToolCallsFalseBoundsRequiredToOneCall) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  ToolRequest single;
  ASSERT_FALSE(parse_tool_fields(
      json::parse("{" + tools + R"(, "tool_choice": "required", "parallel_tool_calls": false})"),
      single));
  EXPECT_FALSE(single.parallel_tool_calls);
  const json one = json::parse(*tool_choice_schema(single));
  EXPECT_EQ(one["minItems"], 1);
  EXPECT_EQ(one["maxItems"], 1);
  ToolRequest parallel;  // the default (and an explicit true): no upper bound
  ASSERT_FALSE(parse_tool_fields(
      json::parse("{" + tools + R"(, "tool_choice": "required", "parallel_tool_calls": true})"),
      parallel));
  EXPECT_FALSE(json::parse(*tool_choice_schema(parallel)).contains("maxItems"));
  // A named function is one call whatever the flag says.
  ToolRequest named;
  ASSERT_FALSE(parse_tool_fields(json::parse("{" + tools + R"(, "parallel_tool_calls": false,
      "tool_choice": {"type": "function", "function": {"name": "f"}}})"),
                                 named));
  // "auto" parses whatever the model writes: false is refused, not ignored (tool_choice given
  // or defaulted), and a non-boolean is a 400 naming the field.
  for (const std::string& choice : {std::string(R"(, "tool_choice": "auto")"), std::string()}) {
    ToolRequest automatic;
    const auto error = parse_tool_fields(
        json::parse("{" + tools + choice + R"(, "parallel_tool_calls": false})"), automatic);
    ASSERT_TRUE(error) << choice;
    EXPECT_EQ(error->status, 501);
    EXPECT_EQ(error->param.value_or(""), "parallel_tool_calls");
  }
  ToolRequest bad;
  const auto error =
      parse_tool_fields(json::parse("{" + tools + R"(, "parallel_tool_calls": "no"})"), bad);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 400);
  EXPECT_NE(error->message.find("true or false"), std::string::npos);
}

}  // namespace
}  // namespace vellum::server

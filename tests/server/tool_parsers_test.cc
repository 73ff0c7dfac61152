// Tool-call and reasoning parsers, whole and streamed: streaming any split of a reply must give
// the same reasoning, content and tool calls as parsing it whole.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <random>

#include "server/tool_parsers.h"

namespace vellum::server {
namespace {

using json = nlohmann::ordered_json;

struct Streamed {
  std::string reasoning;
  std::string content;
  json tool_calls = json::array();  // accumulated by index, as OpenAI clients do
  bool tools_called = false;
};

Streamed stream_in_pieces(const ChatOutputOptions& options, const std::string& text,
                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  ChatDeltaStream stream(options);
  Streamed out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 6)(rng);
    const std::string piece = text.substr(pos, n);
    pos += piece.size();
    const json delta = stream.feed(piece, pos >= text.size());
    if (delta.contains("reasoning_content")) out.reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) out.content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const json& call : delta["tool_calls"]) {
        const size_t index = call["index"];
        if (out.tool_calls.size() <= index) {
          out.tool_calls.push_back({{"name", ""}, {"arguments", ""}});
        }
        if (call.contains("function")) {
          if (call["function"].contains("name")) out.tool_calls[index]["name"] = call["function"]["name"];
          out.tool_calls[index]["arguments"] =
              out.tool_calls[index]["arguments"].get<std::string>() +
              call["function"].value("arguments", std::string());
        }
      }
    }
  }
  out.tools_called = stream.tools_called();
  return out;
}

void expect_stream_matches_whole(const ChatOutputOptions& options, const std::string& text) {
  const ChatMessageParts whole = chat_message_parts(options, text);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE(text + " / seed " + std::to_string(seed));
    const Streamed s = stream_in_pieces(options, text, seed);
    EXPECT_EQ(s.reasoning, whole.reasoning.value_or(""));
    if (options.tool_mode != "function") {
      EXPECT_EQ(s.content, whole.content.value_or(""));
      EXPECT_EQ(s.tools_called, whole.tools_called);
    }
    ASSERT_EQ(s.tool_calls.size(), whole.tool_calls.size());
    for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
      EXPECT_EQ(s.tool_calls[i]["name"], whole.tool_calls[i].name);
      EXPECT_EQ(s.tool_calls[i]["arguments"], whole.tool_calls[i].arguments);
    }
  }
}

TEST(ToolParsers, HermesCallsAndContentBeforeThem) {
  ChatOutputOptions o;
  o.tool_mode = "auto";
  o.tool_call_parser = "hermes";
  const std::string text =
      "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"ping\", \"arguments\": {}}</tool_call>";
  const ChatMessageParts p = chat_message_parts(o, text);
  ASSERT_TRUE(p.tools_called);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "Paris"})");  // as the model wrote it
  EXPECT_EQ(p.tool_calls[1].name, "ping");
  EXPECT_EQ(p.content, "Let me check.");
  EXPECT_EQ(p.tool_calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
  expect_stream_matches_whole(o, text);
  // No call: everything is content; a malformed call too.
  expect_stream_matches_whole(o, "Just text with a < sign and <tool");
  EXPECT_FALSE(chat_message_parts(o, "<tool_call>{broken</tool_call>").tools_called);
  expect_stream_matches_whole(o, "<tool_call>{broken</tool_call>");
}

TEST(ToolParsers, Llama3JsonAndMistral) {
  ChatOutputOptions llama;
  llama.tool_mode = "auto";
  llama.tool_call_parser = "llama3_json";
  const std::string calls =
      R"({"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {"s": "}{"}})";
  const ChatMessageParts p = chat_message_parts(llama, calls);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[1].arguments, R"({"s": "}{"})");
  EXPECT_FALSE(p.content);
  expect_stream_matches_whole(llama, calls);
  expect_stream_matches_whole(llama, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}");
  expect_stream_matches_whole(llama, "The answer is {not a call}");
  EXPECT_FALSE(chat_message_parts(llama, "Hello {x}").tools_called);

  ChatOutputOptions mistral;
  mistral.tool_mode = "auto";
  mistral.tool_call_parser = "mistral";
  const std::string m = R"(Sure. [TOOL_CALLS] [{"name": "f", "arguments": {"k": [1, 2]}}])";
  const ChatMessageParts mp = chat_message_parts(mistral, m);
  ASSERT_EQ(mp.tool_calls.size(), 1u);
  EXPECT_EQ(mp.tool_calls[0].arguments, R"({"k": [1, 2]})");
  EXPECT_EQ(mp.content, "Sure. ");
  expect_stream_matches_whole(mistral, m);
}

TEST(ToolParsers, RequiredAndNamedToolChoice) {
  ChatOutputOptions required;
  required.tool_mode = "required";
  const std::string text = R"([{"name": "f", "parameters": {"a": 1}}, {"name": "g", "parameters": {}}])";
  const ChatMessageParts p = chat_message_parts(required, text);
  ASSERT_TRUE(p.tools_called);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"a": 1})");
  EXPECT_EQ(p.content, "");
  expect_stream_matches_whole(required, text);

  ChatOutputOptions named;
  named.tool_mode = "function";
  named.function_name = "f";
  const ChatMessageParts n = chat_message_parts(named, R"({"a": 1})");
  ASSERT_EQ(n.tool_calls.size(), 1u);
  EXPECT_EQ(n.tool_calls[0].name, "f");
  EXPECT_EQ(n.tool_calls[0].arguments, R"({"a": 1})");
  EXPECT_FALSE(n.tools_called);  // vLLM keeps finish_reason "stop" for a named function
  expect_stream_matches_whole(named, R"({"a": 1})");
}

// Streaming sends each call as it is generated: the id and name as soon as the name is
// complete, then the arguments in pieces, well before the reply ends (vLLM's streaming parsers).
TEST(ToolParsers, CallsStreamWhileTheyAreGenerated) {
  ChatOutputOptions o;
  o.tool_mode = "auto";
  o.tool_call_parser = "hermes";
  const std::string text =
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
      "[1, 2, 3]}}</tool_call><tool_call>{\"arguments\": \"{\\\"q\\\": 1}\", \"name\": "
      "\"search\"}</tool_call>";
  ChatDeltaStream stream(o);
  std::vector<std::pair<size_t, json>> sent;  // (characters fed, tool_calls entry)
  for (size_t i = 0; i < text.size(); ++i) {
    const json delta = stream.feed(text.substr(i, 1), i + 1 == text.size());
    EXPECT_FALSE(delta.contains("content")) << delta.dump();
    if (!delta.contains("tool_calls")) continue;
    for (const json& entry : delta["tool_calls"]) sent.emplace_back(i + 1, entry);
  }
  ASSERT_TRUE(stream.tools_called());
  // The first call's header arrives right after its name's closing quote.
  const size_t name_done = text.find("get_weather\"") + std::string("get_weather\"").size();
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent[0].first, name_done);
  EXPECT_EQ(sent[0].second["index"], 0);
  EXPECT_EQ(sent[0].second["function"]["name"], "get_weather");
  EXPECT_TRUE(sent[0].second.contains("id"));
  // Its arguments in many pieces, all sent before the first call's block ends.
  std::string args;
  size_t pieces = 0;
  for (const auto& [at, entry] : sent) {
    if (entry["index"] != 0 || !entry["function"].contains("arguments")) continue;
    const std::string piece = entry["function"]["arguments"];
    if (piece.empty()) continue;
    args += piece;
    ++pieces;
    EXPECT_LE(at, text.find("</tool_call>"));
  }
  EXPECT_EQ(args, R"({"city": "Paris", "days": [1, 2, 3]})");
  EXPECT_GT(pieces, 10u);
  // The second call names itself after its (string) arguments: the header and the arguments
  // come together once the name is complete, the string's content as the arguments.
  const auto second = std::find_if(sent.begin(), sent.end(),
                                   [](const auto& s) { return s.second["index"] == 1; });
  ASSERT_NE(second, sent.end());
  EXPECT_EQ(second->second["function"]["name"], "search");
  EXPECT_EQ(second->second["function"]["arguments"], R"({"q": 1})");
  expect_stream_matches_whole(o, text);
  // Required mode (a constrained JSON list) streams the same way.
  ChatOutputOptions required;
  required.tool_mode = "required";
  ChatDeltaStream rs(required);
  const std::string list = R"([{"name": "f", "parameters": {"a": 1}}])";
  const json first = rs.feed(list.substr(0, list.find("parameters")), false);
  ASSERT_TRUE(first.contains("tool_calls")) << first.dump();
  EXPECT_EQ(first["tool_calls"][0]["function"]["name"], "f");
  expect_stream_matches_whole(required, list);
}

// Random fragments of call-like text never break the scanner, whole or streamed, and a reply
// that parses whole as calls streams the same calls.
TEST(ToolParsers, RandomCallLikeTextIsHandled) {
  const std::vector<std::string> atoms = {
      "{", "}", "[", "]", "\"", "\\", ":", ",", " ", "name", "arguments", "parameters", "f", "1",
      "\"name\": \"f\"", "\"arguments\": ", "<tool_call>", "</tool_call>", "[TOOL_CALLS]", ";",
      "<|python_tag|>", "{\"a\": [1, {\"b\": \"}\"}]}"};
  std::mt19937_64 rng(7);
  for (const char* parser : {"hermes", "llama3_json", "mistral", ""}) {
    ChatOutputOptions o;
    o.tool_mode = *parser ? "auto" : "required";
    o.tool_call_parser = parser;
    for (int trial = 0; trial < 400; ++trial) {
      std::string text;
      const size_t n = std::uniform_int_distribution<size_t>(1, 24)(rng);
      for (size_t i = 0; i < n; ++i) {
        text += atoms[std::uniform_int_distribution<size_t>(0, atoms.size() - 1)(rng)];
      }
      const ChatMessageParts whole = chat_message_parts(o, text);
      const Streamed streamed = stream_in_pieces(o, text, static_cast<uint64_t>(trial));
      if (whole.tools_called) {
        ASSERT_EQ(streamed.tool_calls.size(), whole.tool_calls.size()) << text;
        for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
          EXPECT_EQ(streamed.tool_calls[i]["name"], whole.tool_calls[i].name) << text;
          EXPECT_EQ(streamed.tool_calls[i]["arguments"], whole.tool_calls[i].arguments) << text;
        }
      }
    }
  }
}

TEST(ReasoningParsers, ThinkBlocksSplitOffWholeAndStreamed) {
  ChatOutputOptions r1;
  r1.reasoning_parser = "deepseek_r1";
  const ChatMessageParts p = chat_message_parts(r1, "<think>Let me see.</think>The answer is 4.");
  EXPECT_EQ(p.reasoning, "Let me see.");
  EXPECT_EQ(p.content, "The answer is 4.");
  expect_stream_matches_whole(r1, "<think>Let me see.</think>The answer is 4.");
  expect_stream_matches_whole(r1, "No start tag</think> then content");
  const ChatMessageParts open = chat_message_parts(r1, "still thinking <");
  EXPECT_EQ(open.reasoning, "still thinking <");
  EXPECT_FALSE(open.content);
  expect_stream_matches_whole(r1, "still thinking <");

  ChatOutputOptions qwen;
  qwen.reasoning_parser = "qwen3";
  EXPECT_FALSE(chat_message_parts(qwen, "plain answer").reasoning);
  EXPECT_EQ(chat_message_parts(qwen, "plain answer").content, "plain answer");
  expect_stream_matches_whole(qwen, "plain answer");
  expect_stream_matches_whole(qwen, "<think>hmm</think>\n\nok");
  // Reasoning, then a tool call in the content.
  qwen.tool_mode = "auto";
  qwen.tool_call_parser = "hermes";
  const std::string both =
      "<think>need weather</think><tool_call>{\"name\": \"w\", \"arguments\": {}}</tool_call>";
  const ChatMessageParts b = chat_message_parts(qwen, both);
  EXPECT_EQ(b.reasoning, "need weather");
  ASSERT_EQ(b.tool_calls.size(), 1u);
  expect_stream_matches_whole(qwen, both);
}

}  // namespace
}  // namespace vellum::server

// What a chat reply's text becomes in the API (vLLM's tool parsers and reasoning parsers):
//   - --reasoning-parser deepseek_r1 | qwen3: the text up to "</think>" is `reasoning_content`
//     (deepseek_r1: everything before it, a leading "<think>" dropped; qwen3: only when the reply
//     opens with "<think>"), the rest is `content`;
//   - tool_choice "auto" with --tool-call-parser: tool calls parsed out of the content —
//     hermes (Hermes / Qwen: <tool_call>{"name", "arguments"}</tool_call> blocks), llama3_json
//     (a reply that is {"name", "parameters" | "arguments"} objects, separated by ";", after an
//     optional <|python_tag|>), mistral ([TOOL_CALLS] [{"name", "arguments"}, ...]);
//   - tool_choice "required": the constrained reply, a JSON list of {"name", "parameters"};
//   - a named tool_choice: the constrained reply is the function's arguments.
// Non-streaming replies use chat_message_parts(); streaming ones feed each text delta through a
// ChatDeltaStream, which holds back text that may begin a marker and streams each tool call as it
// is generated, as vLLM does: a delta.tool_calls entry with the id and name once the name is
// complete, then the arguments piece by piece (OpenAI clients accumulate them by index). The
// arguments are the model's own text in both modes (a JSON string argument: its content).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace vellum::server {

bool is_tool_call_parser(const std::string& name);  // hermes, llama3_json, mistral
bool is_reasoning_parser(const std::string& name);  // deepseek_r1, qwen3

struct ToolCall {
  std::string id;  // "chatcmpl-tool-<32 hex>"
  std::string name;
  std::string arguments;  // JSON text
};

struct ChatOutputOptions {
  std::string reasoning_parser;  // empty: none
  std::string tool_mode = "none";  // "none", "auto", "required" or "function"
  std::string tool_call_parser;    // for "auto"; empty: tool calls stay in the content
  std::string function_name;       // for "function"
};

struct ChatMessageParts {
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
  std::vector<ToolCall> tool_calls;
  bool tools_called = false;  // finish_reason becomes "tool_calls" (auto / required)
};

ChatMessageParts chat_message_parts(const ChatOutputOptions& options, const std::string& text);

// The "tool_calls" JSON of the API ({"id", "type": "function", "function": {"name",
// "arguments"}}); with_index adds each entry's "index" (streamed deltas).
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index);

class ChatDeltaStream {
 public:
  explicit ChatDeltaStream(ChatOutputOptions options) : options_(std::move(options)) {}
  // The delta object of one chunk for the new text ({"reasoning_content", "reasoning"},
  // {"content"} and/or {"tool_calls"}); empty when everything is held back. `finished`: the
  // reply is complete, flush everything.
  nlohmann::ordered_json feed(const std::string& text, bool finished);
  bool tools_called() const { return tools_called_; }

 private:
  void feed_reasoning(const std::string& text, bool finished, nlohmann::ordered_json& delta);
  void feed_content(const std::string& text, bool finished, nlohmann::ordered_json& delta);
  // Adds delta.tool_calls for what buffered_ holds beyond what was sent.
  void stream_tool_calls(nlohmann::ordered_json& delta);

  struct StreamedCall {
    std::string id;
    bool started = false;    // id and name sent
    size_t args_sent = 0;    // bytes of an object / array argument sent
    bool args_done = false;  // the arguments are complete and sent
  };

  ChatOutputOptions options_;
  // Reasoning: 0 undecided (qwen3 before the reply shows whether it opens with <think>),
  // 1 in the reasoning, 2 past it (or none).
  int reasoning_phase_ = -1;
  std::string reasoning_pending_;
  std::string content_pending_;  // held back: may begin a tool-call marker
  std::string buffered_;         // everything from the marker on (auto), or the whole reply
  bool buffering_ = false;
  bool named_started_ = false;
  std::string named_id_;
  bool tools_called_ = false;
  std::vector<StreamedCall> streamed_;
};

}  // namespace vellum::server

#include "server/tool_parsers.h"

#include <random>

#include "server/serving.h"

namespace vellum::server {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kThinkStart = "<think>";
constexpr const char* kThinkEnd = "</think>";
constexpr const char* kHermesStart = "<tool_call>";
constexpr const char* kHermesEnd = "</tool_call>";
constexpr const char* kMistralStart = "[TOOL_CALLS]";
constexpr const char* kPythonTag = "<|python_tag|>";

std::string new_tool_call_id() { return "chatcmpl-tool-" + random_id(); }

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker_suffix(const std::string& text, const std::string& marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.compare(text.size() - n, n, marker, 0, n) == 0) return n;
  }
  return 0;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

std::string arguments_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// {"name", "arguments" | "parameters"} -> a call; false when the object is not one.
bool call_from_object(const json& obj, std::vector<ToolCall>* calls) {
  if (!obj.is_object() || !obj.contains("name") || !obj.at("name").is_string()) return false;
  ToolCall call;
  call.id = new_tool_call_id();
  call.name = obj.at("name").get<std::string>();
  if (obj.contains("arguments")) {
    call.arguments = arguments_text(obj.at("arguments"));
  } else if (obj.contains("parameters")) {
    call.arguments = arguments_text(obj.at("parameters"));
  } else {
    call.arguments = "{}";
  }
  calls->push_back(std::move(call));
  return true;
}

std::optional<json> parse_json(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

struct Extracted {
  bool called = false;
  std::vector<ToolCall> calls;
  std::optional<std::string> content;
};

Extracted extract_hermes(const std::string& text) {
  Extracted out;
  const size_t first = text.find(kHermesStart);
  if (first == std::string::npos) {
    out.content = text;
    return out;
  }
  size_t pos = first;
  while (pos != std::string::npos) {
    const size_t begin = pos + std::string(kHermesStart).size();
    size_t end = text.find(kHermesEnd, begin);
    const std::string body = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    const auto obj = parse_json(trim(body));
    if (!obj || !call_from_object(*obj, &out.calls)) {
      // A malformed call: vLLM returns the whole text as content.
      return Extracted{false, {}, text};
    }
    if (end == std::string::npos) break;
    pos = text.find(kHermesStart, end);
  }
  out.called = !out.calls.empty();
  const std::string before = text.substr(0, first);
  if (!trim(before).empty()) out.content = before;
  return out;
}

Extracted extract_llama3(const std::string& text) {
  Extracted out;
  std::string body = trim(text);
  if (body.rfind(kPythonTag, 0) == 0) body = trim(body.substr(std::string(kPythonTag).size()));
  if (body.empty() || body[0] != '{') {
    out.content = text;
    return out;
  }
  // One or more objects separated by ";".
  size_t pos = 0;
  while (pos < body.size()) {
    size_t depth = 0;
    bool in_string = false;
    size_t end = pos;
    for (; end < body.size(); ++end) {
      const char c = body[end];
      if (in_string) {
        if (c == '\\') {
          ++end;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && depth > 0 && --depth == 0) {
        break;
      }
    }
    const auto obj = parse_json(body.substr(pos, end + 1 - pos));
    if (!obj || !call_from_object(*obj, &out.calls)) return Extracted{false, {}, text};
    pos = body.find_first_not_of(" \t\r\n;", end + 1);
    if (pos == std::string::npos) break;
    if (body[pos] != '{') return Extracted{false, {}, text};
  }
  out.called = !out.calls.empty();
  return out;
}

Extracted extract_mistral(const std::string& text) {
  Extracted out;
  const size_t first = text.find(kMistralStart);
  if (first == std::string::npos) {
    out.content = text;
    return out;
  }
  const std::string body = trim(text.substr(first + std::string(kMistralStart).size()));
  const auto parsed = parse_json(body);
  if (!parsed) return Extracted{false, {}, text};
  if (parsed->is_array()) {
    for (const json& obj : *parsed) {
      if (!call_from_object(obj, &out.calls)) return Extracted{false, {}, text};
    }
  } else if (!call_from_object(*parsed, &out.calls)) {
    return Extracted{false, {}, text};
  }
  out.called = !out.calls.empty();
  const std::string before = text.substr(0, first);
  if (!trim(before).empty()) out.content = before;
  return out;
}

Extracted extract_auto(const std::string& parser, const std::string& text) {
  if (parser == "hermes") return extract_hermes(text);
  if (parser == "llama3_json") return extract_llama3(text);
  if (parser == "mistral") return extract_mistral(text);
  return Extracted{false, {}, text};
}

// tool_choice "required": [{"name", "parameters"}, ...].
Extracted extract_required(const std::string& text) {
  Extracted out;
  const auto parsed = parse_json(text);
  if (!parsed || !parsed->is_array()) return Extracted{false, {}, text};
  for (const json& obj : *parsed) {
    if (!call_from_object(obj, &out.calls)) return Extracted{false, {}, text};
  }
  out.called = !out.calls.empty();
  return out;
}

}  // namespace

bool is_tool_call_parser(const std::string& name) {
  return name == "hermes" || name == "llama3_json" || name == "mistral";
}
bool is_reasoning_parser(const std::string& name) {
  return name == "deepseek_r1" || name == "qwen3";
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call;
    if (with_index) call["index"] = i;
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

ChatMessageParts chat_message_parts(const ChatOutputOptions& options, const std::string& text) {
  ChatMessageParts parts;
  std::string content = text;
  if (!options.reasoning_parser.empty()) {
    std::string body = text;
    const size_t lead = body.find_first_not_of(" \t\r\n");
    const bool opens = lead != std::string::npos && body.compare(lead, 7, kThinkStart) == 0;
    if (options.reasoning_parser == "deepseek_r1" || opens) {
      if (opens) body = body.substr(lead + 7);
      const size_t end = body.find(kThinkEnd);
      if (end == std::string::npos) {
        parts.reasoning = body;
        content.clear();
        parts.content = std::nullopt;
        if (options.tool_mode == "none" || options.tool_mode == "auto") return parts;
      } else {
        parts.reasoning = body.substr(0, end);
        content = body.substr(end + std::string(kThinkEnd).size());
      }
    }
  }
  if (options.tool_mode == "function") {
    parts.tool_calls.push_back(ToolCall{new_tool_call_id(), options.function_name, content});
    parts.content = "";
    return parts;
  }
  Extracted e;
  if (options.tool_mode == "required") {
    e = extract_required(content);
  } else if (options.tool_mode == "auto" && !options.tool_call_parser.empty()) {
    e = extract_auto(options.tool_call_parser, content);
  } else {
    e.content = content;
  }
  parts.tools_called = e.called;
  parts.tool_calls = std::move(e.calls);
  parts.content = e.called && options.tool_mode == "required" ? std::optional<std::string>("")
                                                                : e.content;
  return parts;
}

void ChatDeltaStream::feed_reasoning(const std::string& text, bool finished, json& delta) {
  if (reasoning_phase_ < 0) reasoning_phase_ = options_.reasoning_parser == "deepseek_r1" ? 1 : 0;
  reasoning_pending_ += text;
  if (reasoning_phase_ == 0) {
    // qwen3: reasoning only when the reply opens with <think>.
    const size_t lead = reasoning_pending_.find_first_not_of(" \t\r\n");
    if (lead == std::string::npos && !finished) return;
    const std::string rest = lead == std::string::npos ? "" : reasoning_pending_.substr(lead);
    const std::string start(kThinkStart);
    if (rest.size() < start.size() && start.compare(0, rest.size(), rest) == 0 && !finished) return;
    reasoning_phase_ = rest.rfind(start, 0) == 0 ? 1 : 2;
    if (reasoning_phase_ == 2) {
      std::string all = std::move(reasoning_pending_);
      reasoning_pending_.clear();
      feed_content(all, finished, delta);
      return;
    }
  }
  if (reasoning_phase_ == 1) {
    // Drop a leading <think> once it is complete.
    const size_t lead = reasoning_pending_.find_first_not_of(" \t\r\n");
    const std::string start(kThinkStart);
    if (lead != std::string::npos && reasoning_pending_.compare(lead, start.size(), start) == 0) {
      reasoning_pending_.erase(0, lead + start.size());
    } else if (lead != std::string::npos && !finished &&
               reasoning_pending_.size() - lead < start.size() &&
               start.compare(0, reasoning_pending_.size() - lead, reasoning_pending_, lead,
                             std::string::npos) == 0) {
      return;  // maybe the start of <think>
    }
    const size_t end = reasoning_pending_.find(kThinkEnd);
    std::string reasoning;
    std::string after;
    if (end != std::string::npos) {
      reasoning = reasoning_pending_.substr(0, end);
      after = reasoning_pending_.substr(end + std::string(kThinkEnd).size());
      reasoning_pending_.clear();
      reasoning_phase_ = 2;
    } else {
      const size_t hold = finished ? 0 : partial_marker_suffix(reasoning_pending_, kThinkEnd);
      reasoning = reasoning_pending_.substr(0, reasoning_pending_.size() - hold);
      reasoning_pending_.erase(0, reasoning.size());
    }
    if (!reasoning.empty()) {
      delta["reasoning_content"] = reasoning;
      delta["reasoning"] = reasoning;
    }
    if (reasoning_phase_ == 2 && (!after.empty() || finished)) feed_content(after, finished, delta);
    return;
  }
  std::string all = std::move(reasoning_pending_);
  reasoning_pending_.clear();
  feed_content(all, finished, delta);
}

void ChatDeltaStream::feed_content(const std::string& text, bool finished, json& delta) {
  const std::string& mode = options_.tool_mode;
  if (mode == "function") {
    if (text.empty() && named_started_) return;
    json call = {{"index", 0}};
    if (!named_started_) {
      named_started_ = true;
      named_id_ = new_tool_call_id();
      call["id"] = named_id_;
      call["type"] = "function";
      call["function"] = {{"name", options_.function_name}, {"arguments", text}};
    } else {
      call["function"] = {{"arguments", text}};
    }
    delta["tool_calls"] = json::array({std::move(call)});
    return;
  }
  const bool parse_auto = mode == "auto" && !options_.tool_call_parser.empty();
  if (mode == "required" || (parse_auto && buffering_)) {
    buffered_ += text;
  } else if (parse_auto) {
    content_pending_ += text;
    std::string marker;
    if (options_.tool_call_parser == "hermes") marker = kHermesStart;
    if (options_.tool_call_parser == "mistral") marker = kMistralStart;
    if (options_.tool_call_parser == "llama3_json") {
      // The whole reply is the call: decide on its first visible character.
      const size_t lead = content_pending_.find_first_not_of(" \t\r\n");
      if (lead == std::string::npos && !finished) return;
      const std::string tag(kPythonTag);
      const std::string rest = lead == std::string::npos ? "" : content_pending_.substr(lead);
      if (!finished && rest.size() < tag.size() && tag.compare(0, rest.size(), rest) == 0) return;
      if (!rest.empty() && (rest[0] == '{' || rest.rfind(tag, 0) == 0)) {
        buffering_ = true;
        buffered_ = std::move(content_pending_);
        content_pending_.clear();
      } else {
        options_.tool_call_parser.clear();  // plain content from here on
      }
    } else {
      const size_t at = content_pending_.find(marker);
      if (at != std::string::npos) {
        buffering_ = true;
        buffered_ = content_pending_.substr(at);
        content_pending_.erase(at);
      }
    }
    const size_t hold =
        buffering_ || finished || marker.empty() ? 0 : partial_marker_suffix(content_pending_, marker);
    const std::string out = content_pending_.substr(0, content_pending_.size() - hold);
    content_pending_.erase(0, out.size());
    if (!out.empty()) delta["content"] = out;
  } else {
    const std::string out = content_pending_ + text;
    content_pending_.clear();
    if (!out.empty()) delta["content"] = out;
  }
  if (!finished || buffered_.empty()) return;
  Extracted e = mode == "required" ? extract_required(buffered_)
                                   : extract_auto(options_.tool_call_parser, buffered_);
  buffered_.clear();
  if (!e.called) {
    if (e.content && !e.content->empty()) {
      delta["content"] = delta.value("content", std::string()) + *e.content;
    }
    return;
  }
  tools_called_ = true;
  if (e.content && !e.content->empty() && mode != "required") {
    delta["content"] = delta.value("content", std::string()) + *e.content;
  }
  delta["tool_calls"] = tool_calls_json(e.calls, true);
}

json ChatDeltaStream::feed(const std::string& text, bool finished) {
  json delta = json::object();
  if (!options_.reasoning_parser.empty()) {
    feed_reasoning(text, finished, delta);
  } else {
    feed_content(text, finished, delta);
  }
  return delta;
}

}  // namespace vellum::server

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

// One tool-call object {"name": ..., "arguments" | "parameters": ...} in model output, scanned
// without needing it complete (streaming): where it is, its name once the name's string is
// complete, and where its arguments value lies (the first of "arguments" / "parameters").
struct CallScan {
  static constexpr size_t npos = std::string::npos;
  size_t begin = 0;    // the object's '{'
  size_t end = npos;   // one past its closing '}'; npos while incomplete
  std::optional<std::string> name;
  size_t args_begin = npos;  // the arguments value's first byte (npos: no such key yet)
  size_t args_end = npos;    // one past its last byte; npos while incomplete
  bool malformed = false;    // not JSON the scanner understands: never a call
};

// One past the string starting at text[i] == '"'; npos when it does not end within text.
size_t skip_string(const std::string& text, size_t i) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return std::string::npos;
}

// One past the JSON value starting at text[i]; npos when it does not end within text (or is
// malformed: an unbalanced bracket or an empty value).
size_t skip_value(const std::string& text, size_t i) {
  if (i >= text.size()) return std::string::npos;
  if (text[i] == '"') return skip_string(text, i);
  if (text[i] == '{' || text[i] == '[') {
    std::string closers;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '"') {
        i = skip_string(text, i);
        if (i == std::string::npos) return i;
        --i;
      } else if (c == '{') {
        closers.push_back('}');
      } else if (c == '[') {
        closers.push_back(']');
      } else if (c == '}' || c == ']') {
        if (closers.empty() || closers.back() != c) return std::string::npos;
        closers.pop_back();
        if (closers.empty()) return i + 1;
      }
    }
    return std::string::npos;
  }
  // A number, true, false or null: up to a delimiter (which must be there to know it ended).
  const size_t end = text.find_first_of(",}] \t\r\n", i);
  return end == i ? std::string::npos : end;
}

size_t skip_space(const std::string& text, size_t i) {
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' ||
                             text[i] == '\n')) {
    ++i;
  }
  return i;
}

std::optional<std::string> string_value(const std::string& quoted) {
  try {
    const json v = json::parse(quoted);
    if (v.is_string()) return v.get<std::string>();
  } catch (const json::exception&) {
  }
  return std::nullopt;
}

CallScan scan_call(const std::string& text, size_t open) {
  CallScan s;
  s.begin = open;
  size_t i = skip_space(text, open + 1);
  if (i < text.size() && text[i] == '}') {
    s.end = i + 1;
    return s;
  }
  while (i < text.size()) {
    if (text[i] != '"') {
      s.malformed = true;
      return s;
    }
    const size_t key_end = skip_string(text, i);
    if (key_end == CallScan::npos) return s;
    const std::optional<std::string> key = string_value(text.substr(i, key_end - i));
    i = skip_space(text, key_end);
    if (i >= text.size()) return s;
    if (text[i] != ':' || !key) {
      s.malformed = true;
      return s;
    }
    i = skip_space(text, i + 1);
    if (i >= text.size()) return s;
    const bool is_args = (*key == "arguments" || *key == "parameters") && s.args_begin == CallScan::npos;
    if (is_args) s.args_begin = i;
    const size_t value_end = skip_value(text, i);
    if (value_end == CallScan::npos) return s;
    if (is_args) s.args_end = value_end;
    if (*key == "name" && text[i] == '"') s.name = string_value(text.substr(i, value_end - i));
    i = skip_space(text, value_end);
    if (i >= text.size()) return s;
    if (text[i] == '}') {
      s.end = i + 1;
      return s;
    }
    if (text[i] != ',') {
      s.malformed = true;
      return s;
    }
    i = skip_space(text, i + 1);
  }
  return s;
}

// Every top-level object of `text` (brace depth 0; strings, brackets and other text between
// objects skipped), each scanned; the last may be incomplete.
std::vector<CallScan> scan_calls(const std::string& text) {
  std::vector<CallScan> out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '"') {
      i = skip_string(text, i);
      if (i == std::string::npos) break;
      continue;
    }
    if (text[i] != '{') {
      ++i;
      continue;
    }
    out.push_back(scan_call(text, i));
    const CallScan& s = out.back();
    if (s.end != CallScan::npos) {
      i = s.end;
      continue;
    }
    if (s.malformed) {
      // Skip the rest of the malformed object by brace balance.
      i = skip_value(text, i);
      if (i == std::string::npos) break;
      continue;
    }
    break;  // incomplete: the text ends inside it
  }
  return out;
}

// The arguments of a complete call as the API returns them: the value as the model wrote it,
// a JSON string's content, or "{}" when the call has none.
std::string call_arguments(const std::string& text, const CallScan& s) {
  if (s.args_begin == CallScan::npos) return "{}";
  const std::string raw = text.substr(s.args_begin, s.args_end - s.args_begin);
  if (text[s.args_begin] == '"') return string_value(raw).value_or(raw);
  return raw;
}

// The calls of `text`, which must be nothing but complete call objects (and separators);
// false when one is malformed or has no name.
bool calls_from_text(const std::string& text, std::vector<ToolCall>* calls) {
  const std::vector<CallScan> scans = scan_calls(text);
  if (scans.empty()) return false;
  for (const CallScan& s : scans) {
    if (s.malformed || s.end == CallScan::npos || !s.name) return false;
    // The scanner is lenient about what lies inside values; JSON decides.
    if (!json::accept(text.substr(s.begin, s.end - s.begin))) return false;
    calls->push_back(ToolCall{new_tool_call_id(), *s.name, call_arguments(text, s)});
  }
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

// `value` (one JSON value, text) as calls: an object, or with `array` a list of objects, each a
// call with a name. The arguments keep the model's own text (as streaming sends them).
bool calls_from_value(const std::string& value, bool array, std::vector<ToolCall>* calls) {
  const auto parsed = parse_json(value);
  if (!parsed) return false;
  size_t num_objects = 1;
  if (array && parsed->is_array()) {
    for (const json& element : *parsed) {
      if (!element.is_object()) return false;
    }
    num_objects = parsed->size();
  } else if (!parsed->is_object()) {
    return false;
  }
  std::vector<ToolCall> found;
  if (num_objects > 0 && !calls_from_text(value, &found)) return false;
  if (found.size() != num_objects) return false;
  calls->insert(calls->end(), found.begin(), found.end());
  return true;
}

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
    if (!calls_from_value(trim(body), false, &out.calls)) {
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
    const size_t end = skip_value(body, pos);
    if (end == std::string::npos ||
        !calls_from_value(body.substr(pos, end - pos), false, &out.calls)) {
      return Extracted{false, {}, text};
    }
    pos = body.find_first_not_of(" \t\r\n;", end);
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
  if (!calls_from_value(body, true, &out.calls)) return Extracted{false, {}, text};
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
  if (!parsed || !parsed->is_array() ||
      !calls_from_value(text, true, &out.calls)) {
    return Extracted{false, {}, text};
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
  // A forced call's text is its arguments, never content: a reply cut before the calls closed
  // has no calls and empty content (vLLM, OpenAI).
  parts.content = options.tool_mode == "required" ? std::optional<std::string>("") : e.content;
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
  if (buffered_.empty()) return;
  stream_tool_calls(delta);
  if (!finished) return;
  if (!streamed_.empty()) {
    buffered_.clear();
    return;
  }
  // Nothing looked like a call while streaming: what the whole reply says (content, usually).
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

void ChatDeltaStream::stream_tool_calls(json& delta) {
  const std::vector<CallScan> scans = scan_calls(buffered_);
  json entries = json::array();
  for (size_t k = 0; k < scans.size(); ++k) {
    const CallScan& s = scans[k];
    if (s.malformed) break;
    if (k == streamed_.size()) {
      if (!s.name) break;  // a call starts once its name is complete
      streamed_.push_back(StreamedCall{new_tool_call_id()});
    }
    StreamedCall& call = streamed_[k];
    json entry = {{"index", k}};
    json function = json::object();
    if (!call.started) {
      call.started = true;
      entry["id"] = call.id;
      entry["type"] = "function";
      function["name"] = *s.name;
    }
    std::string piece;
    if (s.args_begin != CallScan::npos) {
      const char first = buffered_[s.args_begin];
      if (first == '{' || first == '[') {
        // An object or array: every byte so far belongs to it; send what is new.
        const size_t available = s.args_end != CallScan::npos ? s.args_end : buffered_.size();
        const size_t from = s.args_begin + call.args_sent;
        if (available > from) piece = buffered_.substr(from, available - from);
        call.args_sent += piece.size();
        call.args_done = s.args_end != CallScan::npos;
      } else if (s.args_end != CallScan::npos && !call.args_done) {
        piece = call_arguments(buffered_, s);  // a string or scalar: whole once complete
        call.args_done = true;
      }
    } else if (s.end != CallScan::npos && !call.args_done) {
      piece = "{}";
      call.args_done = true;
    }
    if (!piece.empty() || !function.empty()) {
      function["arguments"] = piece;
      entry["function"] = std::move(function);
      entries.push_back(std::move(entry));
    }
  }
  if (entries.empty()) return;
  tools_called_ = true;
  delta["tool_calls"] = std::move(entries);
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

#include "server/serving_responses.h"

#include <fmt/format.h>

#include <ctime>
#include <string_view>
#include <utility>

#include "server/openai_protocol.h"

namespace vellum::server {
namespace {

using json = nlohmann::ordered_json;

// Sampling and serving fields of vLLM's ResponsesRequest that mean the same in a chat completion
// request (vLLM's extra sampling parameters included); passed through as they are.
constexpr std::string_view kPassedThrough[] = {
    "model", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids",
    "repetition_penalty", "presence_penalty", "frequency_penalty", "logit_bias", "min_tokens",
    "ignore_eos", "skip_special_tokens", "include_stop_str_in_output", "bad_words",
    "allowed_token_ids", "priority", "request_id", "cache_salt", "chat_template",
    "chat_template_kwargs", "structured_outputs", "user", "parallel_tool_calls",
    "prompt_cache_key", "service_tier", "top_logprobs"};

// Request fields the Response object echoes back.
constexpr std::string_view kEchoed[] = {"instructions", "max_output_tokens", "metadata",
                                        "parallel_tool_calls", "previous_response_id",
                                        "reasoning", "temperature", "top_p", "text",
                                        "tool_choice", "tools", "top_logprobs", "user"};

std::string item_id(std::string_view prefix) { return fmt::format("{}_{}", prefix, random_id()); }

// The text of a message's content: a string, or a list of input_text / output_text parts.
std::variant<std::string, ApiError> content_text(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return ApiError::bad_request(fmt::format("'{}' must be a string or a list of parts", field),
                                 field);
  }
  std::string text;
  for (const json& part : content) {
    const std::string type = part.value("type", "");
    if (type != "input_text" && type != "output_text" && type != "text") {
      return ApiError::bad_request(
          fmt::format("content part type '{}' is not supported: Vellum serves text models "
                      "(input_text and output_text parts)",
                      type),
          field);
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return ApiError::bad_request(fmt::format("a {} part needs a string 'text'", type), field);
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// The Responses input (a string, or a list of items) as chat messages appended to `messages`.
std::optional<ApiError> append_input_messages(const json& input, json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return std::nullopt;
  }
  if (!input.is_array()) {
    return ApiError::bad_request("'input' must be a string or a list of items", "input");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string field = fmt::format("input[{}]", i);
    if (!item.is_object()) return ApiError::bad_request(field + " must be an object", "input");
    const std::string type = item.value("type", item.contains("role") ? "message" : "");
    if (type == "message") {
      std::string role = item.value("role", "");
      if (role == "developer") role = "system";  // OpenAI: developer messages take system's place
      if (role != "user" && role != "system" && role != "assistant") {
        return ApiError::bad_request(
            fmt::format("{}.role '{}' must be user, system, developer or assistant", field, role),
            "input");
      }
      auto text = content_text(item.value("content", json()), field + ".content");
      if (auto* error = std::get_if<ApiError>(&text)) return *error;
      messages.push_back({{"role", role}, {"content", std::get<std::string>(text)}});
    } else if (type == "function_call") {
      json call{{"id", item.value("call_id", "")},
                {"type", "function"},
                {"function",
                 {{"name", item.value("name", "")}, {"arguments", item.value("arguments", "")}}}};
      // Consecutive calls are one assistant turn.
      if (!messages.empty() && messages.back().value("role", "") == "assistant" &&
          messages.back().contains("tool_calls")) {
        messages.back()["tool_calls"].push_back(std::move(call));
      } else {
        messages.push_back({{"role", "assistant"},
                            {"content", nullptr},
                            {"tool_calls", json::array({std::move(call)})}});
      }
    } else if (type == "function_call_output") {
      const json& output = item.value("output", json());
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", item.value("call_id", "")},
                          {"content", output.is_string() ? output.get<std::string>()
                                                         : output.dump()}});
    } else if (type == "reasoning") {
      std::string text;
      for (const json& part : item.value("content", json::array())) {
        text += part.value("text", "");
      }
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", text}});
    } else {
      return ApiError::bad_request(
          fmt::format("{}.type '{}' is not supported: use message, function_call, "
                      "function_call_output or reasoning items",
                      field, type),
          "input");
    }
  }
  return std::nullopt;
}

// Responses function tools ({type, name, description, parameters}) as chat tools.
std::variant<json, ApiError> chat_tools(const json& tools) {
  if (!tools.is_array()) return ApiError::bad_request("'tools' must be a list", "tools");
  json out = json::array();
  for (const json& tool : tools) {
    const std::string type = tool.value("type", "");
    if (type != "function") {
      return ApiError::bad_request(
          fmt::format("tool type '{}' is not supported: Vellum runs no hosted tools (web "
                      "search, file search, code interpreter, MCP); give function tools",
                      type),
          "tools");
    }
    json function{{"name", tool.value("name", "")}};
    if (tool.contains("description")) function["description"] = tool["description"];
    if (tool.contains("parameters")) function["parameters"] = tool["parameters"];
    if (tool.contains("strict")) function["strict"] = tool["strict"];
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_object() && choice.value("type", "") == "function" && choice.contains("name")) {
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  return choice;
}

// text.format as a chat response_format.
std::variant<json, ApiError> response_format_of(const json& text) {
  if (!text.is_object() || !text.contains("format")) return json();
  const json& format = text["format"];
  const std::string type = format.value("type", "");
  if (type == "text") return json();
  if (type == "json_object") return json{{"type", "json_object"}};
  if (type == "json_schema") {
    json schema{{"name", format.value("name", "response")}};
    if (format.contains("schema")) schema["schema"] = format["schema"];
    if (format.contains("strict")) schema["strict"] = format["strict"];
    if (format.contains("description")) schema["description"] = format["description"];
    return json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  }
  return ApiError::bad_request(
      fmt::format("text.format type '{}' is not supported: use text, json_object or json_schema",
                  type),
      "text.format");
}

// A chat completion's logprobs entries as output_text logprobs (the same fields).
json output_text_logprobs(const json& choice) {
  const json& logprobs = choice.value("logprobs", json());
  if (!logprobs.is_object() || !logprobs.contains("content")) return json::array();
  json out = json::array();
  for (const json& entry : logprobs["content"]) {
    json top = json::array();
    for (const json& alternative : entry.value("top_logprobs", json::array())) {
      top.push_back({{"token", alternative.value("token", "")},
                     {"logprob", alternative.value("logprob", 0.0)},
                     {"bytes", alternative.value("bytes", json::array())}});
    }
    out.push_back({{"token", entry.value("token", "")},
                   {"logprob", entry.value("logprob", 0.0)},
                   {"bytes", entry.value("bytes", json::array())},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

json usage_of(const json& chat_usage) {
  const int64_t input = chat_usage.value("prompt_tokens", int64_t{0});
  const int64_t output = chat_usage.value("completion_tokens", int64_t{0});
  int64_t cached = 0;
  if (chat_usage.contains("prompt_tokens_details") &&
      chat_usage["prompt_tokens_details"].is_object()) {
    cached = chat_usage["prompt_tokens_details"].value("cached_tokens", int64_t{0});
  }
  int64_t reasoning = 0;
  if (chat_usage.contains("completion_tokens_details") &&
      chat_usage["completion_tokens_details"].is_object()) {
    reasoning = chat_usage["completion_tokens_details"].value("reasoning_tokens", int64_t{0});
  }
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", output},
          {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
          {"total_tokens", input + output}};
}

json message_item(const std::string& id, const std::string& status, const std::string& text,
                  json logprobs) {
  return {{"id", id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", json::array({{{"type", "output_text"},
                                    {"text", text},
                                    {"annotations", json::array()},
                                    {"logprobs", std::move(logprobs)}}})}};
}

json reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json function_call_item(const std::string& id, const json& call, const std::string& status) {
  const json& function = call.value("function", json::object());
  return {{"id", id},
          {"type", "function_call"},
          {"call_id", call.value("id", "")},
          {"name", function.value("name", "")},
          {"arguments", function.value("arguments", "")},
          {"status", status}};
}

// The chat reply's reasoning, text and tool calls as Responses output items.
json output_items(const json& choice) {
  json output = json::array();
  const json& message = choice.value("message", json::object());
  const json reasoning = message.value("reasoning_content", json());
  if (reasoning.is_string() && !reasoning.get<std::string>().empty()) {
    output.push_back(reasoning_item(item_id("rs"), reasoning.get<std::string>()));
  }
  const json content = message.value("content", json());
  const json calls = message.value("tool_calls", json::array());
  if ((content.is_string() && !content.get<std::string>().empty()) || calls.empty()) {
    output.push_back(message_item(item_id("msg"), "completed",
                                  content.is_string() ? content.get<std::string>() : "",
                                  output_text_logprobs(choice)));
  }
  for (const json& call : calls) {
    output.push_back(function_call_item(item_id("fc"), call, "completed"));
  }
  return output;
}

// The reply as a chat message for the conversation store (what a later turn renders).
json reply_message(const json& message) {
  json reply{{"role", "assistant"}, {"content", message.value("content", json())}};
  const json reasoning = message.value("reasoning_content", json());
  if (reasoning.is_string()) reply["reasoning_content"] = reasoning;
  const json calls = message.value("tool_calls", json());
  if (calls.is_array() && !calls.empty()) reply["tool_calls"] = calls;
  return reply;
}

bool incomplete(const json& finish_reason) {
  return finish_reason.is_string() && finish_reason.get<std::string>() == "length";
}

}  // namespace

void ResponseStore::put(const std::string& id, StoredResponse response) {
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(id); it != index_.end()) entries_.erase(it->second);
  entries_.emplace_front(id, std::move(response));
  index_[id] = entries_.begin();
  while (entries_.size() > capacity_) {
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->second;
}

std::variant<std::unique_ptr<ResponsesRun>, ApiError> ResponsesRun::start(
    const ServingContext& context, ResponseStore& store, const std::string& body,
    const SamplingParams& defaults) {
  json request;
  try {
    request = json::parse(body);
  } catch (const json::parse_error& e) {
    return ApiError::bad_request(fmt::format("The request body is not valid JSON: {}", e.what()));
  }
  if (!request.is_object()) return ApiError::bad_request("The request body must be an object");
  if (request.value("background", false)) {
    return ApiError::bad_request("background responses are not supported: send the request "
                                 "without background (stream it to see progress)",
                                 "background");
  }
  for (const char* unsupported : {"conversation", "prompt"}) {
    if (request.contains(unsupported) && !request[unsupported].is_null()) {
      return ApiError::bad_request(
          fmt::format("'{}' is not supported: give the conversation as input items or with "
                      "previous_response_id",
                      unsupported),
          unsupported);
    }
  }
  if (request.value("enable_response_messages", false)) {
    return ApiError::bad_request("enable_response_messages is not supported: the prompt's and "
                                 "reply's raw tokens are not returned",
                                 "enable_response_messages");
  }
  if (request.contains("truncation") && request["truncation"] != "disabled") {
    return ApiError::bad_request("truncation must be \"disabled\": prompts longer than the "
                                 "context are refused, not cut",
                                 "truncation");
  }
  if (!request.contains("input")) return ApiError::bad_request("'input' is required", "input");

  std::unique_ptr<ResponsesRun> run(new ResponsesRun());
  run->store_ = &store;
  run->stream_ = request.value("stream", false);
  run->keep_ = request.value("store", true);
  run->id_ = item_id("resp");
  run->created_at_ = static_cast<int64_t>(std::time(nullptr));

  json messages = json::array();
  if (request.contains("previous_response_id") && !request["previous_response_id"].is_null()) {
    const std::string previous = request["previous_response_id"].get<std::string>();
    auto stored = store.get(previous);
    if (!stored) {
      return ApiError::not_found(fmt::format("Response with id '{}' not found.", previous),
                                 "previous_response_id");
    }
    messages = stored->messages;
  }
  if (request.contains("instructions") && request["instructions"].is_string()) {
    // Instructions apply to this turn only (OpenAI): the system message leads the conversation.
    json system{{"role", "system"}, {"content", request["instructions"]}};
    if (!messages.empty() && messages[0].value("role", "") == "system") {
      messages[0] = std::move(system);
    } else {
      messages.insert(messages.begin(), std::move(system));
    }
  }
  if (auto error = append_input_messages(request["input"], messages)) return *error;

  json chat{{"messages", messages}, {"stream", run->stream_}};
  if (run->stream_) chat["stream_options"] = {{"include_usage", true}};
  for (std::string_view key : kPassedThrough) {
    const std::string name(key);
    if (request.contains(name) && !request[name].is_null()) chat[name] = request[name];
  }
  if (request.contains("max_output_tokens") && !request["max_output_tokens"].is_null()) {
    chat["max_completion_tokens"] = request["max_output_tokens"];
  }
  bool want_logprobs = request.contains("top_logprobs") && !request["top_logprobs"].is_null();
  for (const json& include : request.value("include", json::array())) {
    if (include == "message.output_text.logprobs") want_logprobs = true;
  }
  if (want_logprobs) chat["logprobs"] = true;
  if (request.contains("tools") && !request["tools"].empty()) {
    auto tools = chat_tools(request["tools"]);
    if (auto* error = std::get_if<ApiError>(&tools)) return *error;
    chat["tools"] = std::get<json>(std::move(tools));
  }
  if (request.contains("tool_choice")) chat["tool_choice"] = chat_tool_choice(request["tool_choice"]);
  if (request.contains("text")) {
    auto format = response_format_of(request["text"]);
    if (auto* error = std::get_if<ApiError>(&format)) return *error;
    if (!std::get<json>(format).is_null()) chat["response_format"] = std::get<json>(format);
  }

  auto parsed = parse_chat_completion_request(chat.dump(), defaults);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  auto started = ChatRun::start(context, std::move(std::get<ChatCompletionRequest>(parsed)));
  if (auto* error = std::get_if<ApiError>(&started)) return *error;
  run->chat_ = std::move(std::get<std::unique_ptr<ChatRun>>(started));
  run->messages_ = std::move(messages);

  run->echoed_ = json::object();
  run->echoed_["model"] = request.value("model", context.served_model_name);
  for (std::string_view key : kEchoed) {
    const std::string name(key);
    run->echoed_[name] = request.contains(name) ? request[name] : json();
  }
  if (run->echoed_["tools"].is_null()) run->echoed_["tools"] = json::array();
  if (run->echoed_["tool_choice"].is_null()) run->echoed_["tool_choice"] = "auto";
  if (run->echoed_["parallel_tool_calls"].is_null()) run->echoed_["parallel_tool_calls"] = true;
  return run;
}

json ResponsesRun::response_json(const std::string& status, json output,
                                 const json& usage) const {
  json response{{"id", id_},
                {"object", "response"},
                {"created_at", created_at_},
                {"model", echoed_["model"]},
                {"status", status},
                {"error", nullptr},
                {"incomplete_details", status == "incomplete"
                                           ? json{{"reason", "max_output_tokens"}}
                                           : json()},
                {"output", std::move(output)},
                {"usage", usage},
                {"store", keep_},
                {"truncation", "disabled"},
                {"background", false}};
  for (const auto& [key, value] : echoed_.items()) {
    if (key != "model") response[key] = value;
  }
  return response;
}

void ResponsesRun::remember(const json& response, const json& reply) {
  if (!keep_) return;
  StoredResponse stored{response, messages_};
  stored.messages.push_back(reply);
  store_->put(id_, std::move(stored));
}

std::variant<json, ApiError> ResponsesRun::collect(const PeerGoneFn& peer_gone) {
  auto result = chat_->collect(peer_gone);
  if (auto* error = std::get_if<ApiError>(&result)) return *error;
  const json& completion = std::get<json>(result);
  const json& choice = completion["choices"][0];
  json response = response_json(incomplete(choice["finish_reason"]) ? "incomplete" : "completed",
                                output_items(choice), usage_of(completion["usage"]));
  remember(response, reply_message(choice["message"]));
  return response;
}

bool ResponsesRun::stream(const WriteFn& write, const PeerGoneFn& peer_gone) {
  int64_t sequence_number = 0;
  bool write_ok = true;
  auto emit = [&](const std::string& type, json event) {
    json out{{"type", type}, {"sequence_number", sequence_number++}};
    for (auto& [key, value] : event.items()) out[key] = std::move(value);
    write_ok = write_ok && write(fmt::format("event: {}\n{}", type, sse_event(out)));
    return write_ok;
  };

  // The item being streamed: reasoning, then the message; tool calls come whole at the end.
  json output = json::array();
  std::string open_kind;  // "", "reasoning" or "message"
  std::string open_id;
  std::string text;
  json logprobs = json::array();
  json reply{{"role", "assistant"}, {"content", ""}};
  json usage = usage_of(json::object());
  json finish_reason;
  json tool_calls = json::array();
  std::optional<ApiError> failure;

  auto close_open_item = [&]() {
    if (open_kind == "reasoning") {
      const auto index = static_cast<int64_t>(output.size());
      emit("response.reasoning_text.done",
           {{"item_id", open_id}, {"output_index", index}, {"content_index", 0}, {"text", text}});
      json item = reasoning_item(open_id, text);
      emit("response.output_item.done", {{"output_index", index}, {"item", item}});
      output.push_back(std::move(item));
      reply["reasoning_content"] = text;
    } else if (open_kind == "message") {
      const auto index = static_cast<int64_t>(output.size());
      json part{{"type", "output_text"},
                {"text", text},
                {"annotations", json::array()},
                {"logprobs", logprobs}};
      emit("response.output_text.done", {{"item_id", open_id},
                                         {"output_index", index},
                                         {"content_index", 0},
                                         {"text", text},
                                         {"logprobs", logprobs}});
      emit("response.content_part.done",
           {{"item_id", open_id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
      json item = message_item(open_id, "completed", text, logprobs);
      emit("response.output_item.done", {{"output_index", index}, {"item", item}});
      output.push_back(std::move(item));
      reply["content"] = text;
    }
    open_kind.clear();
    text.clear();
    logprobs = json::array();
  };
  auto open_item = [&](const std::string& kind) {
    if (open_kind == kind) return;
    close_open_item();
    open_kind = kind;
    open_id = item_id(kind == "message" ? "msg" : "rs");
    const auto index = static_cast<int64_t>(output.size());
    if (kind == "reasoning") {
      emit("response.output_item.added",
           {{"output_index", index},
            {"item", {{"id", open_id}, {"type", "reasoning"}, {"summary", json::array()}}}});
    } else {
      emit("response.output_item.added",
           {{"output_index", index},
            {"item", {{"id", open_id},
                      {"type", "message"},
                      {"status", "in_progress"},
                      {"role", "assistant"},
                      {"content", json::array()}}}});
      emit("response.content_part.added",
           {{"item_id", open_id},
            {"output_index", index},
            {"content_index", 0},
            {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
    }
  };

  emit("response.created", {{"response", response_json("in_progress", json::array(), json())}});
  emit("response.in_progress",
       {{"response", response_json("in_progress", json::array(), json())}});

  // The chat stream's SSE events, read back as JSON and re-cut into Responses events.
  const WriteFn on_chat_event = [&](const std::string& data) {
    constexpr std::string_view kPrefix = "data: ";
    std::string_view payload(data);
    if (!payload.starts_with(kPrefix)) return write_ok;
    payload.remove_prefix(kPrefix.size());
    while (!payload.empty() && (payload.back() == '\n')) payload.remove_suffix(1);
    if (payload == "[DONE]") return write_ok;
    const json chunk = json::parse(payload, nullptr, false);
    if (chunk.is_discarded()) return write_ok;
    if (chunk.contains("error")) {
      const json& error = chunk["error"];
      failure = ApiError{error.value("code", 500), error.value("type", "InternalServerError"),
                         error.value("message", "generation failed"), std::nullopt};
      return write_ok;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object() && chunk["choices"].empty()) {
      usage = usage_of(chunk["usage"]);
    }
    for (const json& choice : chunk.value("choices", json::array())) {
      const json& delta = choice.value("delta", json::object());
      const json reasoning = delta.value("reasoning_content", json());
      if (reasoning.is_string() && !reasoning.get<std::string>().empty()) {
        open_item("reasoning");
        text += reasoning.get<std::string>();
        emit("response.reasoning_text.delta",
             {{"item_id", open_id},
              {"output_index", static_cast<int64_t>(output.size())},
              {"content_index", 0},
              {"delta", reasoning}});
      }
      const json content = delta.value("content", json());
      if (content.is_string() && !content.get<std::string>().empty()) {
        open_item("message");
        text += content.get<std::string>();
        json delta_logprobs = output_text_logprobs(choice);
        for (const json& entry : delta_logprobs) logprobs.push_back(entry);
        emit("response.output_text.delta", {{"item_id", open_id},
                                            {"output_index", static_cast<int64_t>(output.size())},
                                            {"content_index", 0},
                                            {"delta", content},
                                            {"logprobs", std::move(delta_logprobs)}});
      }
      for (const json& call : delta.value("tool_calls", json::array())) {
        const auto index = call.value("index", int64_t{0});
        while (static_cast<int64_t>(tool_calls.size()) <= index) {
          tool_calls.push_back({{"id", ""},
                                {"type", "function"},
                                {"function", {{"name", ""}, {"arguments", ""}}}});
        }
        json& whole = tool_calls[static_cast<size_t>(index)];
        if (call.contains("id") && call["id"].is_string()) whole["id"] = call["id"];
        const json& function = call.value("function", json::object());
        if (function.contains("name") && function["name"].is_string()) {
          whole["function"]["name"] =
              whole["function"]["name"].get<std::string>() + function["name"].get<std::string>();
        }
        if (function.contains("arguments") && function["arguments"].is_string()) {
          whole["function"]["arguments"] = whole["function"]["arguments"].get<std::string>() +
                                           function["arguments"].get<std::string>();
        }
      }
      if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) {
        finish_reason = choice["finish_reason"];
      }
    }
    return write_ok;
  };
  const bool complete = chat_->stream(on_chat_event, peer_gone);
  if (!complete || !write_ok) return false;
  if (failure) {
    emit("error", {{"code", failure->type}, {"message", failure->message}, {"param", nullptr}});
    return write_ok;
  }
  // An empty reply still gets its message item, as an unstreamed one does.
  if (open_kind.empty() && output.empty() && tool_calls.empty()) open_item("message");
  close_open_item();
  for (const json& call : tool_calls) {
    const auto index = static_cast<int64_t>(output.size());
    const std::string id = item_id("fc");
    emit("response.output_item.added",
         {{"output_index", index}, {"item", function_call_item(id, call, "in_progress")}});
    const std::string arguments = call["function"]["arguments"].get<std::string>();
    emit("response.function_call_arguments.delta",
         {{"item_id", id}, {"output_index", index}, {"delta", arguments}});
    emit("response.function_call_arguments.done",
         {{"item_id", id}, {"output_index", index}, {"arguments", arguments}});
    json item = function_call_item(id, call, "completed");
    emit("response.output_item.done", {{"output_index", index}, {"item", item}});
    output.push_back(std::move(item));
  }
  if (!tool_calls.empty()) reply["tool_calls"] = tool_calls;
  json response =
      response_json(incomplete(finish_reason) ? "incomplete" : "completed", output, usage);
  emit("response.completed", {{"response", response}});
  remember(response, reply);
  return write_ok;
}

}  // namespace vellum::server

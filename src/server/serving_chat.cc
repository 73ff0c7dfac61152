#include "server/serving_chat.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <exception>

namespace vellum::server {

using json = nlohmann::ordered_json;

ChatRun::ChatRun(const ServingContext& context, ChatCompletionRequest request)
    : context_(context), request_(std::move(request)), group_(context) {}

std::variant<std::unique_ptr<ChatRun>, ApiError> ChatRun::start(const ServingContext& context,
                                                                ChatCompletionRequest request) {
  if (auto error = check_model(request.model, context.served_model_name)) return *error;
  const ChatParsers& parsers = context.chat_parsers;
  ChatOutputOptions output_options;
  output_options.reasoning_parser = parsers.reasoning_parser;
  output_options.tool_mode = request.tools.choice;
  output_options.function_name = request.tools.function_name;
  if (request.tools.choice == "auto") {
    if (!parsers.enable_auto_tool_choice || parsers.tool_call_parser.empty()) {
      return ApiError::bad_request(
          "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be "
          "set");
    }
    output_options.tool_call_parser = parsers.tool_call_parser;
    // [TOOL_CALLS] is a special token: keep it in the text so the parser can find it.
    if (parsers.tool_call_parser == "mistral") request.params.skip_special_tokens = false;
  }
  if (auto schema = tool_choice_schema(request.tools)) {
    if (request.params.structured_outputs.has_value()) {
      return ApiError::bad_request(
          "tool_choice \"required\" or a named function is enforced with its own JSON schema "
          "and cannot be combined with response_format or structured_outputs",
          "tool_choice");
    }
    StructuredOutputsParams so;
    so.json = std::move(*schema);
    request.params.structured_outputs = std::move(so);
  }
  if (request.params.use_beam_search && request.tools.choice != "none") {
    // Parsed tool calls need the streamed / final text of one reply; keep it simple and explicit.
    return ApiError::bad_request("tools cannot be combined with beam search", "tool_choice");
  }
  const LLMEngine& engine = context.client->engine();
  Prompt prompt;
  if (request.forwarded_prompt_token_ids) {
    prompt = *request.forwarded_prompt_token_ids;
  } else {
    try {
      prompt = engine.apply_chat_template(request.chat);
    } catch (const std::exception& e) {
      // A missing template, malformed messages or a template error: vLLM's 400.
      return ApiError::bad_request(e.what());
    }
  }
  std::unique_ptr<ChatRun> run(new ChatRun(context, std::move(request)));
  run->output_options_ = std::move(output_options);
  ChatCompletionRequest& r = run->request_;
  constrain_after_reasoning(engine, context.chat_parsers.reasoning_parser, r.params);
  r.params.output_kind = r.stream ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
  auto input = prepare_engine_input(engine, prompt, r.params, r.add_special_tokens, true,
                                    r.truncate_from_right);
  if (auto* error = std::get_if<ApiError>(&input)) return *error;
  run->input_ = std::move(std::get<EngineInput>(input));
  run->header_ = ResponseHeader{"chatcmpl-" + r.request_id.value_or(random_id()),
                                r.stream ? "chat.completion.chunk" : "chat.completion",
                                static_cast<int64_t>(std::time(nullptr)),
                                context.served_model_name};
  if (r.return_tokens_as_token_ids || context.return_tokens_as_token_ids ||
      engine.config().model.skip_tokenizer_init) {
    run->token_text_ = [](int32_t id) { return fmt::format("token_id:{}", id); };
  } else {
    run->token_text_ = [&engine](int32_t id) { return engine.decode({id}, false); };
  }
  run->group_.submit(fmt::format("{}-{}", run->header_.id, random_id().substr(0, 8)), run->input_,
                     r.priority, r.cache_salt);
  return run;
}

json ChatRun::logprobs_json(const CompletionOutput& output) const {
  if (!request_.logprobs || !output.logprobs) return nullptr;
  return chat_logprobs_json(*output.logprobs, request_.top_logprobs.value_or(0), token_text_);
}

std::variant<json, ApiError> ChatRun::collect(const PeerGoneFn& peer_gone) {
  RequestOutput final_output;
  const bool complete = group_.drain(peer_gone, [&](size_t, RequestOutput& out) {
    if (out.finished) final_output = std::move(out);
    return true;
  });
  if (!complete) return ApiError::bad_request("Client disconnected");
  if (auto error = group_.api_error()) return *error;

  std::sort(final_output.outputs.begin(), final_output.outputs.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  json choices = json::array();
  Usage usage{static_cast<int64_t>(final_output.prompt_token_ids.size()), 0,
              final_output.num_cached_tokens};
  for (const CompletionOutput& output : final_output.outputs) {
    if (output.finish_reason == "error") return generation_error();
    const ChatMessageParts parts = chat_message_parts(output_options_, output.text);
    json message{{"role", request_.response_role},
                 {"content", parts.content ? json(request_.echo_text + *parts.content)
                                           : (request_.echo_text.empty()
                                                  ? json()
                                                  : json(request_.echo_text))},
                 {"reasoning", parts.reasoning ? json(*parts.reasoning) : json()},
                 {"reasoning_content", parts.reasoning ? json(*parts.reasoning) : json()}};
    // vLLM leaves the field out when there are no calls.
    if (!parts.tool_calls.empty()) message["tool_calls"] = tool_calls_json(parts.tool_calls, false);
    // vLLM: "tool_calls" when auto parsing found calls, or a "required" reply completed.
    const bool tool_finish =
        parts.tools_called && (output_options_.tool_mode == "auto" || output.finish_reason == "stop");
    json choice{{"index", output.index},
                {"message", std::move(message)},
                {"logprobs", logprobs_json(output)},
                {"finish_reason", tool_finish ? json("tool_calls")
                                  : output.finish_reason ? json(*output.finish_reason)
                                                         : json()},
                {"stop_reason", stop_reason_json(output)}};
    choice["token_ids"] = request_.return_token_ids ? json(output.token_ids) : json();
    choices.push_back(std::move(choice));
    usage.completion_tokens += static_cast<int64_t>(output.token_ids.size());
  }
  json response = header_json(header_);
  response["choices"] = std::move(choices);
  response["usage"] = usage_json(usage);
  response["prompt_logprobs"] = final_output.prompt_logprobs
                                    ? prompt_logprobs_json(*final_output.prompt_logprobs,
                                                           token_text_)
                                    : json();
  // vLLM sends the field as null unless return_token_ids asks for the ids.
  response["prompt_token_ids"] =
      request_.return_token_ids ? json(final_output.prompt_token_ids) : json();
  response["system_fingerprint"] = nullptr;
  if (context_.per_request_metrics) {
    response["metrics"] = per_request_metrics_json(final_output.metrics, usage.completion_tokens);
  }
  return response;
}

bool ChatRun::stream(const WriteFn& write, const PeerGoneFn& peer_gone) {
  const ChatCompletionRequest& r = request_;
  const auto num_choices = static_cast<size_t>(r.params.n);
  const auto prompt_tokens = static_cast<int64_t>(input_.token_ids.size());
  const StreamUsage usage_wanted = stream_usage(r.stream_options, context_.force_include_usage);
  std::vector<int64_t> num_tokens(num_choices, 0);
  // A choice that has sent its finish reason sends nothing more (with n > 1 the others go on).
  std::vector<bool> finish_sent(num_choices, false);
  int64_t cached_tokens = 0;
  RequestMetrics metrics;
  std::vector<ChatDeltaStream> deltas(num_choices, ChatDeltaStream(output_options_));

  auto chunk_with = [&](json choice, size_t i) {
    json chunk = header_json(header_);
    chunk["choices"] = json::array({std::move(choice)});
    if (usage_wanted.continuous) {
      chunk["usage"] = usage_json(Usage{prompt_tokens, num_tokens[i], std::nullopt});
    }
    return sse_event(chunk);
  };

  // The opening chunk of each choice carries the role; an echo follows it.
  for (size_t i = 0; i < num_choices; ++i) {
    json role_choice{{"index", i},
                     {"delta", {{"role", r.response_role}, {"content", ""}}},
                     {"logprobs", nullptr},
                     {"finish_reason", nullptr}};
    json role_chunk = header_json(header_);
    role_chunk["choices"] = json::array({std::move(role_choice)});
    // vLLM: the prompt's ids come with the first chunk ever.
    if (r.return_token_ids && i == 0) role_chunk["prompt_token_ids"] = input_.token_ids;
    if (usage_wanted.continuous) {
      role_chunk["usage"] = usage_json(Usage{prompt_tokens, 0, std::nullopt});
    }
    if (!write(sse_event(role_chunk))) return false;
    if (!r.echo_text.empty()) {
      json echo_choice{{"index", i},
                       {"delta", {{"content", r.echo_text}}},
                       {"logprobs", nullptr},
                       {"finish_reason", nullptr}};
      if (!write(chunk_with(std::move(echo_choice), i))) return false;
    }
  }

  bool write_failed = false;
  bool generation_failed = false;
  const bool complete = group_.drain(peer_gone, [&](size_t, RequestOutput& out) {
    cached_tokens = std::max(cached_tokens, out.num_cached_tokens);
    metrics = out.metrics;
    for (const CompletionOutput& output : out.outputs) {
      const auto i = static_cast<size_t>(output.index);
      if (i >= num_choices || finish_sent[i]) continue;
      if (output.finish_reason == "error") {
        generation_failed = true;
        return false;
      }
      if (output.text.empty() && output.token_ids.empty() && !output.finished()) continue;
      num_tokens[i] += static_cast<int64_t>(output.token_ids.size());
      json delta = deltas[i].feed(output.text, output.finished());
      if (delta.empty() && !output.finished() && !r.logprobs) continue;
      if (delta.empty()) delta["content"] = "";
      // Calls stream while they are generated; the finish reason only comes with the end.
      const bool tool_finish =
          output.finished() && deltas[i].tools_called() &&
          (output_options_.tool_mode == "auto" || output.finish_reason == "stop");
      json choice{{"index", i},
                  {"delta", std::move(delta)},
                  {"logprobs", logprobs_json(output)},
                  {"finish_reason", tool_finish ? json("tool_calls")
                                    : output.finish_reason ? json(*output.finish_reason)
                                                           : json()}};
      if (output.finished()) {
        choice["stop_reason"] = stop_reason_json(output);
        finish_sent[i] = true;
      }
      if (r.return_token_ids) choice["token_ids"] = output.token_ids;
      if (!write(chunk_with(std::move(choice), i))) {
        write_failed = true;
        return false;
      }
    }
    return true;
  });
  if (write_failed || (!complete && !generation_failed)) return false;

  std::optional<Usage> usage;
  std::optional<json> request_metrics;
  if (usage_wanted.at_end) {
    usage = Usage{prompt_tokens, 0, cached_tokens};
    for (int64_t n : num_tokens) usage->completion_tokens += n;
    if (context_.per_request_metrics) {
      request_metrics = per_request_metrics_json(metrics, usage->completion_tokens);
    }
  }
  return finish_stream(write, header_, generation_failed, group_.api_error(), usage,
                       request_metrics);
}

}  // namespace vellum::server

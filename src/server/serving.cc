#include "server/serving.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace vellum::server {

std::optional<ApiError> check_model(const std::optional<std::string>& model,
                                    const std::string& served_model_name) {
  if (!model || *model == served_model_name) return std::nullopt;
  return ApiError::not_found(fmt::format("The model `{}` does not exist.", *model), "model");
}

StreamUsage stream_usage(const StreamOptions& options, bool force_include_usage) {
  if (force_include_usage) return {true, true};
  return {options.include_usage, options.include_usage && options.continuous_usage_stats};
}

nlohmann::ordered_json per_request_metrics_json(const RequestMetrics& metrics,
                                                int64_t num_generation_tokens) {
  const double queued = metrics.arrival_time;
  const double scheduled = metrics.first_scheduled_time;
  const double first_token = metrics.first_token_time;
  const double last_token = metrics.last_token_time;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (scheduled > 0 && first_token > 0) {
    out["time_to_first_token_ms"] = (first_token - scheduled) * 1e3;
  }
  if (first_token > 0 && last_token > 0) {
    out["generation_time_ms"] = (last_token - first_token) * 1e3;
  }
  if (queued > 0 && scheduled > 0) out["queue_time_ms"] = (scheduled - queued) * 1e3;
  if (first_token > 0 && last_token > 0 && num_generation_tokens > 1) {
    out["mean_itl_ms"] =
        (last_token - first_token) / static_cast<double>(num_generation_tokens - 1) * 1e3;
  }
  if (scheduled > 0 && last_token > scheduled) {
    out["tokens_per_second"] =
        static_cast<double>(num_generation_tokens) / (last_token - scheduled);
  }
  return out;
}

std::string random_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

std::variant<EngineInput, ApiError> prepare_engine_input(const LLMEngine& engine,
                                                         const Prompt& prompt,
                                                         const SamplingParams& params,
                                                         bool add_special, bool parse_special,
                                                         bool truncate_from_right) {
  EngineInput input;
  const int64_t vocab_size = engine.vocab_size();
  const int64_t max_model_len = engine.max_model_len();
  if (const auto* text = std::get_if<std::string>(&prompt)) {
    if (engine.config().model.skip_tokenizer_init) {
      return ApiError::bad_request(
          "The server was started with --skip-tokenizer-init: prompts must be token ids",
          "prompt");
    }
    input.token_ids = engine.encode(*text, add_special, parse_special);
    input.prompt_text = *text;
  } else {
    input.token_ids = std::get<std::vector<int32_t>>(prompt);
    for (int32_t id : input.token_ids) {
      if (id < 0 || id >= vocab_size) {
        return ApiError::bad_request(fmt::format("Token id {} is out of vocabulary", id),
                                     "prompt");
      }
    }
  }

  if (params.truncate_prompt_tokens) {
    int64_t keep = *params.truncate_prompt_tokens;
    if (keep == -1) keep = max_model_len;
    if (keep > max_model_len) {
      return ApiError::bad_request(
          fmt::format("truncate_prompt_tokens value ({}) is greater than max_model_len ({}). "
                      "Please, select a smaller truncation size.",
                      keep, max_model_len),
          "truncate_prompt_tokens");
    }
    const auto size = static_cast<int64_t>(input.token_ids.size());
    if (keep >= 0 && size > keep && truncate_from_right) {
      input.token_ids.resize(static_cast<size_t>(keep));
    } else if (keep >= 0 && size > keep) {
      input.token_ids.erase(input.token_ids.begin(), input.token_ids.begin() + (size - keep));
    }
  }

  const auto prompt_len = static_cast<int64_t>(input.token_ids.size());
  if (prompt_len == 0) return ApiError::bad_request("The decoder prompt cannot be empty", "prompt");
  if (prompt_len >= max_model_len) {
    return ApiError::bad_request(
        fmt::format("This model's maximum context length is {} tokens. However, your request has "
                    "{} input tokens. Please reduce the length of the input messages.",
                    max_model_len, prompt_len),
        "input_tokens");
  }

  // vLLM's get_max_tokens: the smallest of the request's value, what the context leaves and the
  // model's generation_config max_new_tokens (a value below 1 stays for validate() to reject).
  input.params = params;
  const int64_t room = max_model_len - prompt_len;
  int64_t max_tokens = std::min(params.max_tokens.value_or(room), room);
  if (const std::optional<int64_t> cap = engine.default_max_tokens()) {
    max_tokens = std::min(max_tokens, *cap);
  }
  input.params.max_tokens = max_tokens;

  if (auto error = input.params.validate()) {
    return ApiError::bad_request(error->message, error->param);
  }
  if (auto error = input.params.validate_for_model(
          SamplingModelLimits{vocab_size, engine.config().model.max_logprobs})) {
    return ApiError::bad_request(error->message, error->param);
  }
  if (input.params.structured_outputs.has_value()) {
    if (auto error = check_structured_outputs(*input.params.structured_outputs)) {
      return ApiError::bad_request(*error, "structured_outputs");
    }
  }
  return input;
}

void constrain_after_reasoning(const LLMEngine& engine, const std::string& reasoning_parser,
                               SamplingParams& params) {
  if (reasoning_parser.empty() || !params.structured_outputs.has_value() ||
      engine.config().model.skip_tokenizer_init) {
    return;
  }
  // vLLM's reasoners need the marker as one token of the vocabulary; without it there is no
  // reasoning phase to wait for, and the constraint applies from the first token.
  std::vector<int32_t> marker = engine.encode("</think>", false, true);
  if (marker.size() == 1) params.structured_outputs->reasoning_end_token_ids = std::move(marker);
}

EngineRequestGroup::~EngineRequestGroup() { abort_all(); }

void EngineRequestGroup::submit(const std::string& request_id, const EngineInput& input,
                                int priority, const std::optional<std::string>& cache_salt) {
  request_ids_.push_back(request_id);
  streams_.push_back(context_.client->submit(request_id, Prompt(input.token_ids), input.params,
                                             priority, cache_salt.value_or("")));
  if (context_.on_request_submitted) context_.on_request_submitted(input.params);
}

bool EngineRequestGroup::drain(
    const PeerGoneFn& peer_gone,
    const std::function<bool(size_t prompt_idx, RequestOutput& output)>& on_output) {
  // One stream: block on it. Several: block briefly on the first open one and take what the
  // others have queued, so no stream waits long behind another.
  constexpr auto kSingleWait = std::chrono::milliseconds(50);
  constexpr auto kMultiWait = std::chrono::milliseconds(10);
  std::vector<bool> finished(streams_.size(), false);
  size_t num_open = streams_.size();
  while (num_open > 0) {
    bool blocked = false;
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (finished[i]) continue;
      auto timeout = std::chrono::milliseconds(0);
      if (!blocked) {
        timeout = streams_.size() == 1 ? kSingleWait : kMultiWait;
        blocked = true;
      }
      for (RequestOutput& output : streams_[i]->wait(timeout)) {
        if (!on_output(i, output)) {
          abort_all();
          return false;
        }
      }
      if (streams_[i]->done()) {
        finished[i] = true;
        --num_open;
        if (auto error = streams_[i]->error(); error && !error_) {
          error_ = *error;
          engine_failed_ = streams_[i]->engine_failed();
        }
      }
    }
    if (num_open > 0 && peer_gone && peer_gone()) {
      abort_all();
      return false;
    }
  }
  return true;
}

void EngineRequestGroup::abort_all() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (!streams_[i]->done()) context_.client->abort(request_ids_[i]);
  }
}

std::optional<ApiError> EngineRequestGroup::api_error() const {
  if (!error_) return std::nullopt;
  if (engine_failed_) return ApiError::internal("Internal server error: " + *error_);
  return ApiError::bad_request(*error_);
}

ApiError generation_error() {
  return ApiError::internal("Internal server error: the engine failed while generating");
}

bool finish_stream(const WriteFn& write, const ResponseHeader& header, bool generation_failed,
                   const std::optional<ApiError>& engine_error, const std::optional<Usage>& usage,
                   const std::optional<nlohmann::ordered_json>& metrics) {
  if (generation_failed) {
    if (!write(sse_event(error_json(generation_error())))) return false;
  } else if (engine_error) {
    if (!write(sse_event(error_json(*engine_error)))) return false;
  } else if (usage) {
    nlohmann::ordered_json chunk = header_json(header);
    chunk["choices"] = nlohmann::ordered_json::array();
    chunk["usage"] = usage_json(*usage);
    if (metrics) chunk["metrics"] = *metrics;
    if (!write(sse_event(chunk))) return false;
  }
  return write(kSseDone);
}

}  // namespace vellum::server

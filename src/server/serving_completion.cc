#include "server/serving_completion.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace vellum::server {

using json = nlohmann::ordered_json;

namespace {

// Logprob positions of `output` (nullptr where there are none).
void append_positions(const std::optional<std::vector<TokenLogprobs>>& logprobs, size_t count,
                      std::vector<const TokenLogprobs*>& positions) {
  for (size_t k = 0; k < count; ++k) {
    positions.push_back(logprobs && k < logprobs->size() ? &(*logprobs)[k] : nullptr);
  }
}

// The prompt part of an echoed choice: the ids and their logprobs (the first has none).
void append_prompt(const RequestOutput& out, std::vector<int32_t>& token_ids,
                   std::vector<const TokenLogprobs*>& positions) {
  token_ids.insert(token_ids.end(), out.prompt_token_ids.begin(), out.prompt_token_ids.end());
  if (out.prompt_token_ids.empty()) return;
  positions.push_back(nullptr);
  append_positions(out.prompt_logprobs, out.prompt_token_ids.size() - 1, positions);
}

TokenTextFn make_token_text(const LLMEngine& engine, bool as_token_ids) {
  // Without a tokenizer (--skip-tokenizer-init) tokens can only be shown by id.
  if (as_token_ids || engine.config().model.skip_tokenizer_init) {
    return [](int32_t id) { return fmt::format("token_id:{}", id); };
  }
  return [&engine](int32_t id) { return engine.decode({id}, false); };
}

}  // namespace

CompletionRun::CompletionRun(const ServingContext& context, CompletionRequest request)
    : context_(context), request_(std::move(request)), group_(context) {}

std::variant<std::unique_ptr<CompletionRun>, ApiError> CompletionRun::start(
    const ServingContext& context, CompletionRequest request) {
  if (auto error = check_model(request.model, context.served_model_name)) return *error;
  const LLMEngine& engine = context.client->engine();
  std::unique_ptr<CompletionRun> run(new CompletionRun(context, std::move(request)));
  CompletionRequest& r = run->request_;
  constrain_after_reasoning(engine, context.chat_parsers.reasoning_parser, r.params);
  r.params.output_kind = r.stream ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
  for (const Prompt& prompt : r.prompts) {
    auto input = prepare_engine_input(engine, prompt, r.params, r.add_special_tokens, false,
                                      r.truncate_from_right);
    if (auto* error = std::get_if<ApiError>(&input)) return *error;
    EngineInput& ready = std::get<EngineInput>(input);
    // Only echo shows the prompt as text: decode token-id prompts for it alone.
    if (r.echo && std::holds_alternative<std::vector<int32_t>>(prompt) &&
        !engine.config().model.skip_tokenizer_init) {
      // As vLLM's renderer: the tokenizer's plain decode, special tokens kept.
      ready.prompt_text = engine.decode(ready.token_ids, false);
    }
    run->inputs_.push_back(std::move(ready));
  }
  run->header_ = ResponseHeader{"cmpl-" + r.request_id.value_or(random_id()), "text_completion",
                                static_cast<int64_t>(std::time(nullptr)),
                                context.served_model_name};
  run->token_text_ = make_token_text(
      engine, r.return_tokens_as_token_ids || context.return_tokens_as_token_ids);
  const std::string suffix = random_id().substr(0, 8);
  for (size_t i = 0; i < run->inputs_.size(); ++i) {
    run->group_.submit(fmt::format("{}-{}-{}", run->header_.id, i, suffix), run->inputs_[i],
                       r.priority, r.cache_salt);
  }
  return run;
}

std::variant<json, ApiError> CompletionRun::collect(const PeerGoneFn& peer_gone) {
  std::vector<RequestOutput> finals(inputs_.size());
  const bool complete = group_.drain(peer_gone, [&](size_t prompt_idx, RequestOutput& out) {
    if (out.finished) finals[prompt_idx] = std::move(out);
    return true;
  });
  if (!complete) return ApiError::bad_request("Client disconnected");
  if (auto error = group_.api_error()) return *error;

  const CompletionRequest& r = request_;
  json choices = json::array();
  Usage usage;
  usage.cached_tokens = 0;
  RequestMetrics metrics;
  for (size_t p = 0; p < finals.size(); ++p) {
    RequestOutput& out = finals[p];
    std::sort(out.outputs.begin(), out.outputs.end(),
              [](const auto& a, const auto& b) { return a.index < b.index; });
    for (const CompletionOutput& output : out.outputs) {
      if (output.finish_reason == "error") return generation_error();
      std::vector<int32_t> token_ids;
      std::vector<const TokenLogprobs*> positions;
      std::string text;
      if (r.echo) {
        append_prompt(out, token_ids, positions);
        text = inputs_[p].prompt_text;
      }
      if (!r.echo_only) {
        token_ids.insert(token_ids.end(), output.token_ids.begin(), output.token_ids.end());
        append_positions(output.logprobs, output.token_ids.size(), positions);
        text += output.text;
      }
      json choice{{"index", choices.size()},
                  {"text", text},
                  {"logprobs", nullptr},
                  {"finish_reason", output.finish_reason ? json(*output.finish_reason) : json()},
                  {"stop_reason", stop_reason_json(output)},
                  {"prompt_logprobs", nullptr}};
      if (r.logprobs) {
        choice["logprobs"] =
            completion_logprobs_json(token_ids, positions, *r.logprobs, 0, token_text_);
      }
      if (out.prompt_logprobs) {
        choice["prompt_logprobs"] = prompt_logprobs_json(*out.prompt_logprobs, token_text_);
      }
      // vLLM sends both fields, null unless return_token_ids asks for the ids.
      choice["prompt_token_ids"] = r.return_token_ids ? json(out.prompt_token_ids) : json();
      choice["token_ids"] = r.return_token_ids ? json(output.token_ids) : json();
      choices.push_back(std::move(choice));
      usage.completion_tokens += static_cast<int64_t>(output.token_ids.size());
    }
    usage.prompt_tokens += static_cast<int64_t>(out.prompt_token_ids.size());
    *usage.cached_tokens += out.num_cached_tokens;
    if (p == 0) metrics = out.metrics;
  }
  json response = header_json(header_);
  response["choices"] = std::move(choices);
  response["usage"] = usage_json(usage);
  response["system_fingerprint"] = nullptr;
  if (context_.per_request_metrics && finals.size() == 1) {
    response["metrics"] = per_request_metrics_json(metrics, usage.completion_tokens);
  }
  return response;
}

bool CompletionRun::stream(const WriteFn& write, const PeerGoneFn& peer_gone) {
  const CompletionRequest& r = request_;
  const auto num_choices = static_cast<size_t>(r.params.n);
  const size_t total = inputs_.size() * num_choices;
  std::vector<int64_t> text_lens(total, 0);
  std::vector<int64_t> num_tokens(total, 0);
  std::vector<bool> has_echoed(total, false);
  std::vector<int64_t> prompt_tokens(inputs_.size(), 0);
  std::vector<int64_t> cached_tokens(inputs_.size(), 0);
  const StreamUsage usage_wanted = stream_usage(r.stream_options, context_.force_include_usage);
  // A choice that has sent its finish reason sends nothing more (with n > 1 the others go on).
  std::vector<bool> finish_sent(total, false);
  RequestMetrics metrics;
  bool write_failed = false;
  bool generation_failed = false;

  const bool complete = group_.drain(peer_gone, [&](size_t p, RequestOutput& out) {
    if (!out.prompt_token_ids.empty()) {
      prompt_tokens[p] = static_cast<int64_t>(out.prompt_token_ids.size());
    }
    cached_tokens[p] = std::max(cached_tokens[p], out.num_cached_tokens);
    if (p == 0) metrics = out.metrics;
    for (const CompletionOutput& output : out.outputs) {
      const size_t i = static_cast<size_t>(output.index) + p * num_choices;
      if (i >= total || finish_sent[i]) continue;
      finish_sent[i] = output.finished();
      std::vector<int32_t> token_ids;
      std::vector<const TokenLogprobs*> positions;
      std::string text;
      if (r.echo && !has_echoed[i]) {
        append_prompt(out, token_ids, positions);
        text = inputs_[p].prompt_text;
        has_echoed[i] = true;
      } else if (output.text.empty() && output.token_ids.empty() && num_tokens[i] == 0 &&
                 !output.finished()) {
        continue;  // nothing yet (chunked prefill): vLLM sends no empty chunks
      }
      if (!r.echo_only) {
        token_ids.insert(token_ids.end(), output.token_ids.begin(), output.token_ids.end());
        append_positions(output.logprobs, output.token_ids.size(), positions);
        text += output.text;
      }
      if (output.finish_reason == "error") {
        generation_failed = true;
        return false;
      }
      json choice{{"index", i},
                  {"text", text},
                  {"logprobs", nullptr},
                  {"finish_reason", output.finish_reason ? json(*output.finish_reason) : json()},
                  {"stop_reason", stop_reason_json(output)}};
      if (r.logprobs) {
        choice["logprobs"] = completion_logprobs_json(token_ids, positions, *r.logprobs,
                                                      text_lens[i], token_text_);
      }
      if (r.return_token_ids) {
        if (token_ids.size() > output.token_ids.size() || num_tokens[i] == 0) {
          choice["prompt_token_ids"] = out.prompt_token_ids;
        }
        choice["token_ids"] = output.token_ids;
      }
      text_lens[i] += num_code_points(text);
      num_tokens[i] += static_cast<int64_t>(output.token_ids.size());
      json chunk = header_json(header_);
      chunk["choices"] = json::array({std::move(choice)});
      if (usage_wanted.continuous) {
        chunk["usage"] = usage_json(Usage{prompt_tokens[p], num_tokens[i], std::nullopt});
      }
      if (!write(sse_event(chunk))) {
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
    usage = Usage{0, 0, 0};
    for (int64_t n : prompt_tokens) usage->prompt_tokens += n;
    for (int64_t n : num_tokens) usage->completion_tokens += n;
    for (int64_t n : cached_tokens) *usage->cached_tokens += n;
    if (context_.per_request_metrics && inputs_.size() == 1) {
      request_metrics = per_request_metrics_json(metrics, usage->completion_tokens);
    }
  }
  return finish_stream(write, header_, generation_failed, group_.api_error(), usage,
                       request_metrics);
}

}  // namespace vellum::server

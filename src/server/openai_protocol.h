// Requests of the OpenAI-compatible API (vLLM's CompletionRequest, ChatCompletionRequest,
// TokenizeRequest, DetokenizeRequest; spec §5.2–5.3) parsed from JSON into SamplingParams and
// engine inputs.
//
// Parsing checks the schema (types, required fields) and the request-level validators of vLLM's
// protocol classes (stream_options without stream, top_logprobs without logprobs, ...). The rules
// of SamplingParams itself and everything that needs the model (prompt length, vocabulary) are
// checked later by the serving layer, on the HTTP thread, before any status line is sent.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/structured_request.h"
#include "vellum/engine.h"
#include "vellum/sampling_params.h"

namespace vellum::server {

// A parsed request or why it was rejected.
template <typename T>
using Parsed = std::variant<T, ApiError>;

struct StreamOptions {
  bool include_usage = false;
  bool continuous_usage_stats = false;
};

// The fields both generation endpoints share.
struct GenerationRequest {
  std::optional<std::string> model;  // none: the served model
  // Sampling parameters as requested. max_tokens holds the request's value (none when not given);
  // the server resolves it per prompt against the context length.
  SamplingParams params;
  bool stream = false;
  StreamOptions stream_options;
  int priority = 0;
  std::optional<std::string> request_id;
  std::optional<std::string> cache_salt;
  bool echo = false;
  bool add_special_tokens = true;
  bool return_token_ids = false;
  bool return_tokens_as_token_ids = false;
  // truncation_side "right": truncate_prompt_tokens keeps the first tokens (default: the last).
  bool truncate_from_right = false;
};

// POST /v1/completions
struct CompletionRequest : GenerationRequest {
  // One engine request per prompt; a prompt is text or token ids.
  std::vector<Prompt> prompts;
  std::optional<int64_t> logprobs;  // the number of top logprobs per position
  // echo with max_tokens = 0: return the prompt only (the engine still runs one step).
  bool echo_only = false;
};

// POST /v1/chat/completions
struct ChatCompletionRequest : GenerationRequest {
  ChatTemplateRequest chat;  // messages, tools and template arguments as JSON text
  ToolRequest tools;         // tools and tool_choice (structured_request.h)
  bool logprobs = false;
  std::optional<int64_t> top_logprobs;
  // The role of the reply ("assistant", or the last message's role when no generation prompt is
  // added) and, for echo, the last message's content when it has that role.
  std::string response_role = "assistant";
  std::string echo_text;
  // kv_transfer_params.prompt_token_ids: the prompt's ids as a prefill server already rendered and
  // tokenized them; they are used as given instead of rendering the messages (vLLM).
  std::optional<std::vector<int32_t>> forwarded_prompt_token_ids;
};

// POST /tokenize (completion form {prompt} or chat form {messages}).
struct TokenizeRequest {
  std::optional<std::string> model;
  std::optional<std::string> prompt;          // completion form
  std::optional<ChatTemplateRequest> chat;    // chat form
  bool add_special_tokens = true;
  bool return_token_strs = false;
};

// POST /detokenize
struct DetokenizeRequest {
  std::optional<std::string> model;
  std::vector<int32_t> tokens;
};

// `defaults`: the model's sampling defaults (LLMEngine::default_sampling_params(), from its
// generation_config.json); temperature, top_p, top_k, min_p and repetition_penalty apply where
// the request does not set them, as vLLM's default_sampling_params do.
Parsed<CompletionRequest> parse_completion_request(const std::string& body,
                                                   const SamplingParams& defaults = {});
Parsed<ChatCompletionRequest> parse_chat_completion_request(const std::string& body,
                                                            const SamplingParams& defaults = {});
Parsed<TokenizeRequest> parse_tokenize_request(const std::string& body);
Parsed<DetokenizeRequest> parse_detokenize_request(const std::string& body);

}  // namespace vellum::server

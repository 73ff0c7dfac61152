// The generation path shared by /v1/completions and /v1/chat/completions: turning a prompt into
// validated engine input (tokenize, truncate, length and vocabulary checks, max_tokens, sampling
// parameter validation), and the engine requests of one API request, submitted, read and aborted
// together.
//
// Everything here runs on an HTTP thread and talks to the engine only through EngineClient.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/openai_protocol.h"
#include "server/response_format.h"
#include "vellum/engine.h"
#include "vellum/engine_client.h"

namespace vellum::server {

// How chat replies are parsed (vLLM's --enable-auto-tool-choice, --tool-call-parser,
// --reasoning-parser; see tool_parsers.h).
struct ChatParsers {
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // empty: none
  std::string reasoning_parser;  // empty: none
};

// What the serving code needs from the server around it.
struct ServingContext {
  ChatParsers chat_parsers;
  EngineClient* client = nullptr;
  std::string served_model_name;
  // Called once per submitted engine request (metrics); may be empty.
  std::function<void(const SamplingParams&)> on_request_submitted;
  // vLLM's --enable-force-include-usage: every streamed chunk carries usage, and the stream ends
  // with a usage chunk, whatever stream_options say.
  bool force_include_usage = false;
  // vLLM's --enable-per-request-metrics: responses (and a stream's usage chunk) carry "metrics"
  // with the request's timings.
  bool per_request_metrics = false;
  // vLLM's --return-tokens-as-token-ids: the default of the request field of that name.
  bool return_tokens_as_token_ids = false;
};

// Whether a stream carries usage at its end, and on every chunk (vLLM's should_include_usage).
struct StreamUsage {
  bool at_end = false;
  bool continuous = false;
};
StreamUsage stream_usage(const StreamOptions& options, bool force_include_usage);

// vLLM's per-request timing metrics (build_per_request_timing_metrics): time to first token from
// scheduling, decode time, queue time, mean inter-token latency and output tokens per second over
// the inference interval; a field whose timestamps are missing is left out.
nlohmann::ordered_json per_request_metrics_json(const RequestMetrics& metrics,
                                                int64_t num_generation_tokens);

// True when the HTTP client has gone away; polled while waiting for the engine.
using PeerGoneFn = std::function<bool()>;
// Writes one piece of an SSE body; false when the client is gone.
using WriteFn = std::function<bool(const std::string& data)>;

// None or the served name is fine; any other name is vLLM's 404 with param "model".
std::optional<ApiError> check_model(const std::optional<std::string>& model,
                                    const std::string& served_model_name);

// A random id suffix (32 hex digits), as vLLM's random_uuid().
std::string random_id();

// One prompt ready for the engine.
struct EngineInput {
  std::vector<int32_t> token_ids;
  std::string prompt_text;  // a text prompt as given; empty for token ids (decode for echo)
  SamplingParams params;    // max_tokens resolved against the context length
};

// Tokenizes (text prompts with add_special / parse_special), applies truncate_prompt_tokens,
// checks the ids against the vocabulary and the length against max_model_len, resolves max_tokens
// (none: what the context leaves) and validates the sampling parameters. Errors are vLLM's
// 400s with `param`.
std::variant<EngineInput, ApiError> prepare_engine_input(const LLMEngine& engine,
                                                         const Prompt& prompt,
                                                         const SamplingParams& params,
                                                         bool add_special, bool parse_special,
                                                         bool truncate_from_right = false);

// Structured outputs under --reasoning-parser: the constraint starts after the reasoning, at the
// first "</think>" of the output (or at once when the prompt holds one), as vLLM's reasoner does,
// so the model thinks freely and then answers in the constrained form. No-op without a reasoning
// parser, without structured outputs, without a tokenizer, or when "</think>" is not one token
// of the vocabulary (vLLM's reasoners need it as one).
void constrain_after_reasoning(const LLMEngine& engine, const std::string& reasoning_parser,
                               SamplingParams& params);

// The engine requests of one API request (one per prompt). Destroying the group aborts whatever
// has not finished, so a request whose HTTP client vanished never keeps its KV blocks.
class EngineRequestGroup {
 public:
  explicit EngineRequestGroup(const ServingContext& context) : context_(context) {}
  ~EngineRequestGroup();
  EngineRequestGroup(const EngineRequestGroup&) = delete;
  EngineRequestGroup& operator=(const EngineRequestGroup&) = delete;

  // A cache_salt keeps the request's prefix-cache blocks apart from other salts' (vLLM).
  void submit(const std::string& request_id, const EngineInput& input, int priority,
              const std::optional<std::string>& cache_salt);
  size_t size() const { return streams_.size(); }

  // Reads outputs until every request finished, calling on_output(prompt_idx, output) for each;
  // polls peer_gone between waits. Returns false when the peer went away or on_output returned
  // false; every unfinished request is then aborted.
  bool drain(const PeerGoneFn& peer_gone,
             const std::function<bool(size_t prompt_idx, RequestOutput& output)>& on_output);

  // The first engine rejection or failure, if any (vLLM's message).
  const std::optional<std::string>& error() const { return error_; }
  // That error as the API answers it: 400 for a rejected request, 500 when the engine failed.
  std::optional<ApiError> api_error() const;

  void abort_all();

 private:
  const ServingContext& context_;
  std::vector<std::string> request_ids_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::optional<std::string> error_;
  bool engine_failed_ = false;
};

// The error of a generation that ended with finish_reason "error" (vLLM's GenerationError).
ApiError generation_error();

// Ends an SSE response once its engine requests have drained: an error event when generation
// failed or the engine rejected a request, else the usage chunk when one was asked for; then
// "data: [DONE]". `metrics` (per-request metrics) rides on the usage chunk. False when a write
// fails.
bool finish_stream(const WriteFn& write, const ResponseHeader& header, bool generation_failed,
                   const std::optional<ApiError>& engine_error, const std::optional<Usage>& usage,
                   const std::optional<nlohmann::ordered_json>& metrics = std::nullopt);

}  // namespace vellum::server

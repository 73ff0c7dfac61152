// POST /v1/completions over the engine (vLLM's OpenAIServingCompletion): one engine request per
// prompt, choice index = prompt_idx * n + i, echo, logprobs, usage, streaming (spec §5.2, §5.4).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <variant>
#include <vector>

#include "server/openai_protocol.h"
#include "server/response_format.h"
#include "server/serving.h"

namespace vellum::server {

class CompletionRun {
 public:
  // Validates every prompt against the model and submits the engine requests; nothing is
  // submitted when any prompt is invalid. The engine must be ready.
  static std::variant<std::unique_ptr<CompletionRun>, ApiError> start(
      const ServingContext& context, CompletionRequest request);

  bool streaming() const { return request_.stream; }

  // Waits for every engine request and returns the response JSON, or the error to answer with.
  std::variant<nlohmann::ordered_json, ApiError> collect(const PeerGoneFn& peer_gone);

  // Writes the SSE body (chunks, the usage chunk, an error event if the engine failed, then
  // [DONE]). Returns false when the client went away; its engine requests are then aborted.
  bool stream(const WriteFn& write, const PeerGoneFn& peer_gone);

 private:
  CompletionRun(const ServingContext& context, CompletionRequest request);

  const ServingContext& context_;
  CompletionRequest request_;
  std::vector<EngineInput> inputs_;
  EngineRequestGroup group_;
  ResponseHeader header_;
  TokenTextFn token_text_;
};

}  // namespace vellum::server

// POST /v1/chat/completions over the engine (vLLM's OpenAIServingChat): the chat is rendered with
// the chat template, tokenized without adding special tokens (the template writes them), and
// served as one engine request with n choices (spec §5.3, §5.4). Tool calls and reasoning are not
// parsed out of the text.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <variant>

#include "server/openai_protocol.h"
#include "server/response_format.h"
#include "server/serving.h"
#include "server/tool_parsers.h"

namespace vellum::server {

class ChatRun {
 public:
  // Renders and validates the chat and submits its engine request. The engine must be ready.
  static std::variant<std::unique_ptr<ChatRun>, ApiError> start(const ServingContext& context,
                                                                ChatCompletionRequest request);

  bool streaming() const { return request_.stream; }

  // Waits for the engine request and returns the response JSON, or the error to answer with.
  std::variant<nlohmann::ordered_json, ApiError> collect(const PeerGoneFn& peer_gone);

  // Writes the SSE body; false when the client went away (its engine request is then aborted).
  bool stream(const WriteFn& write, const PeerGoneFn& peer_gone);

 private:
  ChatRun(const ServingContext& context, ChatCompletionRequest request);

  nlohmann::ordered_json logprobs_json(const CompletionOutput& output) const;

  const ServingContext& context_;
  ChatCompletionRequest request_;
  EngineInput input_;
  EngineRequestGroup group_;
  ResponseHeader header_;
  TokenTextFn token_text_;
  ChatOutputOptions output_options_;  // how the reply's text is split (tool_parsers.h)
};

}  // namespace vellum::server

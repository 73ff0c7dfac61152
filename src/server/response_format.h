// JSON of the OpenAI-compatible responses and SSE chunks (vLLM's CompletionResponse,
// CompletionStreamResponse, ChatCompletionResponse, ChatCompletionStreamResponse, UsageInfo,
// CompletionLogProbs, ChatCompletionLogProbs; spec §5.2–5.4). Pure functions of engine outputs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vellum/outputs.h"

namespace vellum::server {

// The text of one token as the API shows it: vLLM decodes the single token, or writes
// "token_id:<id>" with return_tokens_as_token_ids.
using TokenTextFn = std::function<std::string(int32_t token_id)>;

// The fields every response and chunk starts with.
struct ResponseHeader {
  std::string id;       // "cmpl-…" / "chatcmpl-…"
  std::string object;   // "text_completion", "chat.completion", "chat.completion.chunk"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<int64_t> cached_tokens;  // prompt_tokens_details.cached_tokens
};

nlohmann::ordered_json usage_json(const Usage& usage);
nlohmann::ordered_json header_json(const ResponseHeader& header);

// A position's logprobs in vLLM's dict order: the chosen token first, then the top
// alternatives by rank, each id once. `num_top` limits how many entries are kept (-1: all).
std::vector<std::pair<int32_t, float>> ranked_logprobs(const TokenLogprobs& position,
                                                       int64_t num_top);

// Characters of a UTF-8 string as Python's len() counts them (code points): the unit of the
// completions API's text_offset.
int64_t num_code_points(const std::string& text);

// Completions logprobs {"text_offset", "token_logprobs", "tokens", "top_logprobs"} of `token_ids`.
// positions[i] holds the logprobs of token_ids[i], or nullopt (the first prompt token), which
// gives null entries. Each top_logprobs entry maps token text to logprob for the chosen token
// and the `num_top` best (vLLM returns num_top + 1 entries). text_offset counts code points from
// initial_text_offset, as vLLM's len() of each token string.
nlohmann::ordered_json completion_logprobs_json(const std::vector<int32_t>& token_ids,
                                        const std::vector<const TokenLogprobs*>& positions,
                                        int64_t num_top, int64_t initial_text_offset,
                                        const TokenTextFn& token_text);

// Chat logprobs {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]} with
// `num_top` alternatives per position (-1: all the engine returned).
nlohmann::ordered_json chat_logprobs_json(const std::vector<TokenLogprobs>& positions,
                                          int64_t num_top, const TokenTextFn& token_text);

// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...]; the
// leading null stands for the first prompt token, which has no logprob.
nlohmann::ordered_json prompt_logprobs_json(const std::vector<TokenLogprobs>& positions,
                                    const TokenTextFn& token_text);

// "stop_reason": the stop string, the stop token id, or null.
nlohmann::ordered_json stop_reason_json(const CompletionOutput& output);

// One SSE event: "data: <json>\n\n".
std::string sse_event(const nlohmann::ordered_json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// JSON text with invalid UTF-8 replaced (a token may end inside a character).
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace vellum::server

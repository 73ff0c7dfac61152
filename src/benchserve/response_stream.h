// Turns the streamed response of one completion request into its timings (spec §7.2, vLLM's
// async_request_openai_completions / _chat_completions).
#pragma once

#include <string>
#include <string_view>

#include "benchserve/metrics.h"
#include "benchserve/sse_parser.h"

namespace vellum::benchserve {

enum class ApiKind {
  kCompletions,      // /v1/completions: choices[0].text
  kChatCompletions,  // /v1/chat/completions: choices[0].delta.content
};

// Fed the response body of a 200 reply as it arrives, with the time of each piece. A chunk
// whose "choices" is non-empty is a content chunk (even with empty text): the first sets ttft,
// each later one adds a gap to itl, the last sets latency. "usage.completion_tokens" gives the
// output token count. An error event (an "error" object, or an SSE "event: error") or a chunk
// that is not JSON fails the request. Not thread-safe: one tracker per request.
class ResponseStreamTracker {
 public:
  ResponseStreamTracker(ApiKind kind, double start_time);

  void on_bytes(std::string_view bytes, double now);

  // Ends the stream; success needs at least one content chunk and no error.
  RequestOutput finish(double now);

 private:
  void on_event(const SseEvent& event, double now);
  void fail(std::string message);

  ApiKind kind_;
  SseParser parser_;
  RequestOutput out_;
  bool got_content_ = false;
  int64_t num_content_chunks_ = 0;
  int64_t usage_completion_tokens_ = 0;
  double last_content_time_ = 0.0;
};

}  // namespace vellum::benchserve

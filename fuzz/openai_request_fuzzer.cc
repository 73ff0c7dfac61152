// OpenAI request parsing and validation: arbitrary bytes as the body of each endpoint. Every
// body is either parsed into a request whose sampling parameters then validate (or not) against
// a model's limits, or answered with an ApiError of status 4xx (501 for what is not implemented); nothing throws out.
#include <cstdint>
#include <string>
#include <variant>

#include "fuzz_util.h"
#include "server/openai_protocol.h"

namespace {

void check_error(const vellum::server::ApiError& error) {
  // 4xx, or 501 for a feature the server does not implement (refused, never ignored).
  if ((error.status < 400 || error.status >= 500) && error.status != 501) {
    vellum::fuzz::fail("a parse error is neither 4xx nor 501");
  }
  if (error.message.empty()) vellum::fuzz::fail("an ApiError without a message");
}

template <typename Request>
void check(const vellum::server::Parsed<Request>& parsed) {
  if (const auto* error = std::get_if<vellum::server::ApiError>(&parsed)) {
    check_error(*error);
    return;
  }
  if constexpr (requires(const Request& r) { r.params; }) {
    const vellum::SamplingParams& params = std::get<Request>(parsed).params;
    (void)params.validate();
    (void)params.validate_for_model(vellum::SamplingModelLimits{32000, 20});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  check(vellum::server::parse_completion_request(body));
  check(vellum::server::parse_chat_completion_request(body));
  check(vellum::server::parse_tokenize_request(body));
  check(vellum::server::parse_detokenize_request(body));
  return 0;
}

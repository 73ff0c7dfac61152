// Errors of the OpenAI-compatible API in vLLM's shape (spec §5.5):
//   HTTP <status>  {"error": {"message", "type", "param", "code": <status>}}
// A request that fails validation is a normal outcome, so parsing and serving return ApiError
// values instead of throwing.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace vellum::server {

struct ApiError {
  int status = 400;
  std::string type = "BadRequestError";
  std::string message;
  std::optional<std::string> param;  // the offending request field, when one is to blame

  // 400 BadRequestError: a value vLLM rejects (ValueError / VLLMValidationError).
  static ApiError bad_request(std::string message, std::optional<std::string> param = {});
  // 400 "Bad Request": a request that does not match the schema (missing field, wrong JSON
  // type, malformed JSON), as FastAPI's validation handler answers.
  static ApiError invalid_request(std::string message, std::optional<std::string> param = {});
  // 404 NotFoundError, e.g. an unknown model.
  static ApiError not_found(std::string message, std::optional<std::string> param = {});
  // 501 NotImplementedError: a valid request this server cannot serve.
  static ApiError not_implemented(std::string message, std::optional<std::string> param = {});
  // 500 InternalServerError.
  static ApiError internal(std::string message);
  // 503 ServiceUnavailableError: the model is loading, or the server is shutting down.
  static ApiError unavailable(std::string message);
};

// {"error": {"message", "type", "param", "code"}}
nlohmann::ordered_json error_json(const ApiError& error);

}  // namespace vellum::server

#include "server/api_error.h"

namespace vellum::server {

ApiError ApiError::bad_request(std::string message, std::optional<std::string> param) {
  return ApiError{400, "BadRequestError", std::move(message), std::move(param)};
}

ApiError ApiError::invalid_request(std::string message, std::optional<std::string> param) {
  return ApiError{400, "Bad Request", std::move(message), std::move(param)};
}

ApiError ApiError::not_found(std::string message, std::optional<std::string> param) {
  return ApiError{404, "NotFoundError", std::move(message), std::move(param)};
}

ApiError ApiError::not_implemented(std::string message, std::optional<std::string> param) {
  return ApiError{501, "NotImplementedError", std::move(message), std::move(param)};
}

ApiError ApiError::internal(std::string message) {
  return ApiError{500, "InternalServerError", std::move(message), std::nullopt};
}

ApiError ApiError::unavailable(std::string message) {
  return ApiError{503, "ServiceUnavailableError", std::move(message), std::nullopt};
}

nlohmann::ordered_json error_json(const ApiError& error) {
  nlohmann::ordered_json body{{"message", error.message},
                      {"type", error.type},
                      {"param", nullptr},
                      {"code", error.status}};
  if (error.param) body["param"] = *error.param;
  return nlohmann::ordered_json{{"error", std::move(body)}};
}

}  // namespace vellum::server

// POST /v1/responses and GET /v1/responses/{id}: OpenAI's Responses API as vLLM serves it for
// models without the harmony format. A Responses request is translated into a chat completion
// request (instructions and the conversation of previous_response_id become messages,
// text.format becomes response_format, function tools become chat tools, max_output_tokens the
// token limit), served by ChatRun, and its reply translated back: into one Response object, or,
// streamed, into the Responses event sequence (response.created ... response.completed).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>

#include "server/serving.h"
#include "server/serving_chat.h"

namespace vellum::server {

// A finished response and the conversation that led to it, kept for GET /v1/responses/{id} and
// previous_response_id.
struct StoredResponse {
  nlohmann::ordered_json response;
  nlohmann::ordered_json messages;  // chat messages: the inputs, then the reply
};

// The responses kept by the server (store: true, the default), at most `capacity`, the least
// recently stored or read dropped first. Thread-safe.
class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}
  void put(const std::string& id, StoredResponse response);
  std::optional<StoredResponse> get(const std::string& id);

 private:
  using Entry = std::pair<std::string, StoredResponse>;
  size_t capacity_;
  std::mutex mutex_;
  std::list<Entry> entries_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

class ResponsesRun {
 public:
  // Translates and validates the request (400 naming the field for what the engine does not
  // serve: hosted tools, files, images, background mode) and submits it.
  static std::variant<std::unique_ptr<ResponsesRun>, ApiError> start(
      const ServingContext& context, ResponseStore& store, const std::string& body,
      const SamplingParams& defaults);

  bool streaming() const { return stream_; }
  std::variant<nlohmann::ordered_json, ApiError> collect(const PeerGoneFn& peer_gone);
  bool stream(const WriteFn& write, const PeerGoneFn& peer_gone);

 private:
  ResponsesRun() = default;

  // The Response object around `output` (status from the chat reply's finish reason).
  nlohmann::ordered_json response_json(const std::string& status,
                                       nlohmann::ordered_json output,
                                       const nlohmann::ordered_json& usage) const;
  void remember(const nlohmann::ordered_json& response, const nlohmann::ordered_json& reply);

  ResponseStore* store_ = nullptr;
  std::unique_ptr<ChatRun> chat_;
  bool stream_ = false;
  bool keep_ = true;  // store
  std::string id_;
  int64_t created_at_ = 0;
  // Request fields the Response object echoes (model, instructions, tools, temperature, ...).
  nlohmann::ordered_json echoed_;
  nlohmann::ordered_json messages_;  // the chat messages sent to the model
};

}  // namespace vellum::server

// The OpenAI-compatible HTTP server (vLLM's api_server; spec §5): cpp-httplib threads parse,
// validate, submit to the EngineClient and write JSON or SSE; the engine runs on its own thread
// (DESIGN.md §4).
//
//   EngineClient client(config);                 // loads in the background
//   HttpServer server(options, client);
//   int port = server.bind().value();            // listening at once: 503 until the model loads
//   std::thread http([&] { server.serve(); });
//   client.wait_until_ready();
//   server.on_engine_ready(&metrics);            // now requests are served
//   ...                                          // SIGTERM:
//   server.shutdown(std::chrono::seconds(5));    // stop accepting, drain, abort the rest
//   http.join();
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
// GET|POST /ping, GET /metrics, POST /tokenize, POST /detokenize, GET /version, GET /load.
// With an API key, paths under /v1 need "Authorization: Bearer <key>" (401 otherwise).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "server/connection_guard.h"
#include "server/metrics.h"
#include "server/serving.h"
#include "server/serving_responses.h"
#include "vellum/engine_client.h"

namespace vellum::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                          // 0: any free port
  std::string api_key;                      // empty: no authentication
  std::string served_model_name;            // the "model" clients name
  std::string model_path;                   // "root" in /v1/models
  size_t max_body_bytes = size_t{32} << 20; // larger bodies get 413
  int num_http_threads = 64;                // concurrent connections being served
  ChatParsers chat_parsers;                 // --enable-auto-tool-choice, --tool-call-parser, ...
  int max_queued_connections = 256;         // waiting for a thread; beyond: answered 503
  double request_timeout_seconds = 30.0;    // to deliver a complete request, else closed
  // vLLM's --root-path: the path prefix of a proxy in front; every route also answers under it.
  std::string root_path;
  bool force_include_usage = false;         // --enable-force-include-usage
  bool per_request_metrics = false;         // --enable-per-request-metrics
  bool return_tokens_as_token_ids = false;  // --return-tokens-as-token-ids
};

class HttpServer {
 public:
  // `client` must outlive the server.
  HttpServer(ServerOptions options, EngineClient& client);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Starts serving the model endpoints once the engine is ready (until then they answer 503).
  // `metrics` (may be null: /metrics is then 404) gets the engine's step reports and every
  // submitted request; it must outlive the engine thread. Call once, before any request can be
  // submitted, i.e. right after client.wait_until_ready().
  void on_engine_ready(ServerMetrics* metrics);

  // Binds the listening socket; returns the port, or nullopt when the address cannot be bound.
  std::optional<int> bind();
  // Accepts and serves connections until shutdown(); returns once every handler has finished.
  void serve();
  // Stops accepting, answers new generation requests with 503, lets in-flight requests finish
  // for up to `grace`, then aborts the rest (their clients get finish_reason "abort") and stops
  // the engine. serve() returns soon after. Idempotent; callable from any thread.
  void shutdown(std::chrono::milliseconds grace);

  // Generation requests being served (GET /load).
  int64_t num_in_flight() const { return num_in_flight_.load(); }
  // Connections closed for not delivering a request in time / answered 503 for lack of room.
  int64_t num_timed_out_connections() const { return guard_.num_timed_out(); }
  int64_t num_overflowed_connections() const { return guard_.num_overflowed(); }

 private:
  // A route's pattern: `path`, and `path` under --root-path when one is set.
  std::string route(const std::string& path) const;
  void install_routes();
  bool authorized(const httplib::Request& req) const;
  // 503 with vLLM's error JSON when the engine is not ready (or shutting down); true if answered.
  bool answer_if_unavailable(httplib::Response& res, bool generation) const;
  void handle_completion(const httplib::Request& req, httplib::Response& res);
  void handle_chat(const httplib::Request& req, httplib::Response& res);
  void handle_responses(const httplib::Request& req, httplib::Response& res);
  void handle_get_response(const httplib::Request& req, httplib::Response& res);
  template <typename Run>
  void respond_with(const httplib::Request& req, httplib::Response& res, std::unique_ptr<Run> run);
  void handle_models(httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);

  ServerOptions options_;
  EngineClient& client_;
  std::atomic<ServerMetrics*> metrics_{nullptr};
  std::atomic<bool> ready_{false};
  ServingContext context_;
  // Responses kept for GET /v1/responses/{id} and previous_response_id.
  ResponseStore responses_{1024};
  ConnectionGuard guard_;
  httplib::Server http_;
  int64_t created_ = 0;
  std::atomic<int64_t> num_in_flight_{0};
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> serving_{false};
  std::atomic<int> listen_fd_{-1};  // recorded when httplib creates the listening socket
};

}  // namespace vellum::server

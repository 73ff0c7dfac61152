#include "server/http_server.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>

#include <ctime>
#include <exception>
#include <memory>
#include <string_view>
#include <thread>

#include "server/api_error.h"
#include "server/openai_protocol.h"
#include "server/peer_connection.h"
#include "server/response_format.h"
#include "server/serving_chat.h"
#include "server/serving_completion.h"

#ifndef VELLUM_VERSION_STRING
#define VELLUM_VERSION_STRING "unknown"
#endif

namespace vellum::server {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kJson = "application/json";

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(dump_json(error_json(error)), kJson);
}

void send_json(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(dump_json(body), kJson);
}

// Compares in time that depends only on the expected value's length, so the response time does
// not reveal how much of a guessed key was right.
bool constant_time_equal(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    diff |= static_cast<unsigned char>(g ^ expected[i]);
  }
  return diff == 0;
}

// A literal path as a std::regex pattern (httplib's routes are regexes).
std::string regex_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// The path without the --root-path prefix, when it has it.
std::string_view without_root_path(std::string_view path, std::string_view root_path) {
  if (root_path.empty() || path.substr(0, root_path.size()) != root_path) return path;
  const std::string_view rest = path.substr(root_path.size());
  return rest.empty() || rest.front() == '/' ? rest : path;
}

bool needs_auth(std::string_view path) {
  return path.starts_with("/v1") || path.starts_with("/v2") || path.starts_with("/inference");
}

// Keeps GET /load's count while a generation request is being served (until its SSE body ends).
class InFlight {
 public:
  explicit InFlight(std::atomic<int64_t>& count) : count_(count) { ++count_; }
  ~InFlight() { --count_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>& count_;
};

ConnectionLimits connection_limits(const ServerOptions& options) {
  ConnectionLimits limits;
  limits.num_workers = std::max(1, options.num_http_threads);
  limits.max_queued = std::max(0, options.max_queued_connections);
  limits.request_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::max(0.001, options.request_timeout_seconds) * 1000.0));
  return limits;
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, EngineClient& client)
    : options_(std::move(options)),
      client_(client),
      guard_(connection_limits(options_)),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  // "/llm/" and "/llm" name the same prefix.
  while (options_.root_path.size() > 1 && options_.root_path.back() == '/') {
    options_.root_path.pop_back();
  }
  if (options_.root_path == "/") options_.root_path.clear();
  context_.client = &client_;
  context_.served_model_name = options_.served_model_name;
  context_.chat_parsers = options_.chat_parsers;
  context_.force_include_usage = options_.force_include_usage;
  context_.per_request_metrics = options_.per_request_metrics;
  context_.return_tokens_as_token_ids = options_.return_tokens_as_token_ids;
  context_.on_request_submitted = [this](const SamplingParams& params) {
    if (ServerMetrics* metrics = metrics_.load()) metrics->on_request_submitted(params);
  };
  // A client that vanishes mid-write must fail the write, not kill the process.
  ::signal(SIGPIPE, SIG_IGN);
  // A bounded pool: connections beyond the queue are answered 503 (see ConnectionGuard).
  http_.new_task_queue = [this] { return guard_.make_task_queue(); };
  http_.set_payload_max_length(options_.max_body_bytes);
  // httplib closes a keep-alive connection after 5 requests by default; clients that pool
  // connections (the openai SDKs, bench serve) then race the close.
  http_.set_keep_alive_max_count(1000);
  http_.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  install_routes();
}

HttpServer::~HttpServer() {
  http_.stop();
  guard_.stop();
}

void HttpServer::on_engine_ready(ServerMetrics* metrics) {
  if (metrics != nullptr) {
    client_.set_step_observer([metrics](const StepReport& report) {
      metrics->observe_step(report);
    });
  }
  metrics_ = metrics;
  ready_ = true;
}

std::optional<int> HttpServer::bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(options_.host);
    if (port <= 0) return std::nullopt;
  } else if (!http_.bind_to_port(options_.host, port)) {
    return std::nullopt;
  }
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of connections (64 clients at once)
  // overflows it and the kernel drops connections. Listening again only raises the backlog.
  if (const int fd = listen_fd_.load(); fd >= 0) ::listen(fd, SOMAXCONN);
  guard_.watch(listen_fd_.load(), port);
  return port;
}

void HttpServer::serve() {
  serving_ = true;
  if (!shutting_down_) http_.listen_after_bind();
  serving_ = false;
}

void HttpServer::shutdown(std::chrono::milliseconds grace) {
  shutting_down_ = true;
  // serve() may still be entering listen: wait until it runs, so that stop() reaches it.
  for (int i = 0; i < 200 && serving_ && !http_.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  http_.stop();
  client_.shutdown(grace);
}

bool HttpServer::authorized(const httplib::Request& req) const {
  if (options_.api_key.empty() || req.method == "OPTIONS" ||
      !needs_auth(without_root_path(req.path, options_.root_path))) {
    return true;
  }
  return constant_time_equal(req.get_header_value("Authorization"), "Bearer " + options_.api_key);
}

bool HttpServer::answer_if_unavailable(httplib::Response& res, bool generation) const {
  if (generation && shutting_down_) {
    send_error(res, ApiError::unavailable("The server is shutting down"));
    return true;
  }
  switch (client_.state()) {
    case EngineClient::State::kReady:
      if (ready_) return false;
      send_error(res, ApiError::unavailable(
                          "The model is still loading; retry when GET /health returns 200"));
      return true;
    case EngineClient::State::kLoading:
      send_error(res, ApiError::unavailable(
                          "The model is still loading; retry when GET /health returns 200"));
      return true;
    case EngineClient::State::kFailed:
      send_error(res, ApiError::internal("The engine failed: " + client_.failure()));
      return true;
    case EngineClient::State::kStopped:
      send_error(res, ApiError::unavailable("The server is shutting down"));
      return true;
  }
  return true;
}

std::string HttpServer::route(const std::string& path) const {
  if (options_.root_path.empty()) return path;
  return "(?:" + regex_escaped(options_.root_path) + ")?" + path;
}

void HttpServer::install_routes() {
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (ConnectionGuard::overflowing()) {
      res.set_header("Connection", "close");
      send_error(res, ApiError::unavailable(
                          "The server has too many connections waiting; retry later"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    // Answered before httplib reads the body: close the connection, or the body's bytes would
    // be read as the client's next request on it (a keep-alive pool's 400s).
    res.set_header("Connection", "close");
    res.status = 401;
    res.set_content(R"({"error":"Unauthorized"})", kJson);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Fills the bodies httplib leaves empty (unknown route, oversized body) with the error JSON.
  http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.status == 503) return;
    if (res.status == 413) {
      send_error(res, ApiError{413, "BadRequestError",
                               fmt::format("The request body is larger than the limit of {} bytes",
                                           options_.max_body_bytes),
                               std::nullopt});
    } else if (res.status == 404) {
      send_error(res, ApiError::not_found(fmt::format("Not Found: {} {}", req.method, req.path)));
    } else {
      send_error(res, ApiError{res.status, "BadRequestError",
                               fmt::format("HTTP error {}", res.status), std::nullopt});
    }
  });
  http_.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string message = "unknown error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        send_error(res, ApiError::internal(message));
      });

  // Once the response is written (a whole SSE stream included), the connection's next request
  // is under the request deadline again.
  http_.set_logger([this](const httplib::Request& req, const httplib::Response&) {
    guard_.end_request(req.remote_addr, req.remote_port);
  });

  // Every route runs once its request is complete (body read): from here until the logger the
  // connection is not subject to the request deadline.
  auto guarded = [this](httplib::Server::Handler handler) {
    return [this, handler = std::move(handler)](const httplib::Request& req,
                                                httplib::Response& res) {
      guard_.begin_request(req.remote_addr, req.remote_port);
      handler(req, res);
    };
  };

  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (ready_ && client_.state() == EngineClient::State::kReady && !shutting_down_) {
      res.status = 200;
      return;
    }
    // A dead engine is unavailable for good (vLLM's EngineDeadError: 503); `vellum serve` exits.
    if (client_.state() == EngineClient::State::kFailed) {
      return send_error(res, ApiError::unavailable("The engine failed: " + client_.failure()));
    }
    answer_if_unavailable(res, true);
  };
  http_.Get(route("/health"), guarded(health));
  http_.Get(route("/ping"), guarded(health));
  http_.Post(route("/ping"), guarded(health));
  http_.Get(route("/version"), guarded([](const httplib::Request&, httplib::Response& res) {
    send_json(res, json{{"version", VELLUM_VERSION_STRING}});
  }));
  http_.Get(route("/load"), guarded([this](const httplib::Request&, httplib::Response& res) {
    send_json(res, json{{"server_load", num_in_flight()}});
  }));
  http_.Get(route("/metrics"), guarded([this](const httplib::Request&, httplib::Response& res) {
    const ServerMetrics* metrics = metrics_.load();
    if (metrics == nullptr) {
      send_error(res, ApiError::not_found("Metrics are not available (yet)"));
      return;
    }
    res.set_content(metrics->render(client_.stats()), "text/plain; version=0.0.4; charset=utf-8");
  }));
  http_.Get(route("/v1/models"), guarded([this](const httplib::Request&, httplib::Response& res) {
    handle_models(res);
  }));
  http_.Post(route("/v1/completions"),
           guarded([this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res);
  }));
  http_.Post(route("/v1/chat/completions"),
           guarded([this](const httplib::Request& req, httplib::Response& res) {
    handle_chat(req, res);
  }));
  http_.Post(route("/v1/responses"),
             guarded([this](const httplib::Request& req, httplib::Response& res) {
               handle_responses(req, res);
             }));
  http_.Get(route("/v1/responses/([^/]+)"),
            guarded([this](const httplib::Request& req, httplib::Response& res) {
              handle_get_response(req, res);
            }));
  http_.Post(route("/tokenize"),
           guarded([this](const httplib::Request& req, httplib::Response& res) {
    handle_tokenize(req, res);
  }));
  http_.Post(route("/detokenize"),
           guarded([this](const httplib::Request& req, httplib::Response& res) {
    handle_detokenize(req, res);
  }));
}

template <typename Run>
void HttpServer::respond_with(const httplib::Request& req, httplib::Response& res,
                              std::unique_ptr<Run> run) {
  auto in_flight = std::make_shared<InFlight>(num_in_flight_);
  const PeerConnection peer =
      PeerConnection::find(req.remote_addr, req.remote_port, req.local_port);
  const PeerGoneFn peer_gone = [peer] { return peer.closed(); };
  if (!run->streaming()) {
    auto result = run->collect(peer_gone);
    if (auto* error = std::get_if<ApiError>(&result)) {
      send_error(res, *error);
    } else {
      send_json(res, std::get<json>(result));
    }
    return;
  }
  // The provider owns the run: when httplib drops the response (done, or the client vanished
  // before the body began), the run's destructor aborts whatever is unfinished.
  std::shared_ptr<Run> shared(std::move(run));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [shared, peer_gone, in_flight](size_t, httplib::DataSink& sink) {
        const bool complete = shared->stream(
            [&sink](const std::string& data) { return sink.write(data.data(), data.size()); },
            peer_gone);
        if (complete) sink.done();
        return complete;
      });
}

void HttpServer::handle_completion(const httplib::Request& req, httplib::Response& res) {
  if (answer_if_unavailable(res, true)) return;
  auto parsed =
      parse_completion_request(req.body, client_.engine().default_sampling_params());
  if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  auto started = CompletionRun::start(context_, std::move(std::get<CompletionRequest>(parsed)));
  if (auto* error = std::get_if<ApiError>(&started)) return send_error(res, *error);
  respond_with(req, res, std::move(std::get<std::unique_ptr<CompletionRun>>(started)));
}

void HttpServer::handle_chat(const httplib::Request& req, httplib::Response& res) {
  if (answer_if_unavailable(res, true)) return;
  auto parsed =
      parse_chat_completion_request(req.body, client_.engine().default_sampling_params());
  if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  auto started = ChatRun::start(context_, std::move(std::get<ChatCompletionRequest>(parsed)));
  if (auto* error = std::get_if<ApiError>(&started)) return send_error(res, *error);
  respond_with(req, res, std::move(std::get<std::unique_ptr<ChatRun>>(started)));
}

void HttpServer::handle_models(httplib::Response& res) {
  if (answer_if_unavailable(res, false)) return;
  const json permission{{"id", "modelperm-" + random_id()},
                        {"object", "model_permission"},
                        {"created", created_},
                        {"allow_create_engine", false},
                        {"allow_sampling", true},
                        {"allow_logprobs", true},
                        {"allow_search_indices", false},
                        {"allow_view", true},
                        {"allow_fine_tuning", false},
                        {"organization", "*"},
                        {"group", nullptr},
                        {"is_blocking", false}};
  const json model{{"id", options_.served_model_name},
                   {"object", "model"},
                   {"created", created_},
                   {"owned_by", "vllm"},
                   {"root", options_.model_path},
                   {"parent", nullptr},
                   {"max_model_len", client_.engine().max_model_len()},
                   {"permission", json::array({permission})}};
  send_json(res, json{{"object", "list"}, {"data", json::array({model})}});
}

void HttpServer::handle_responses(const httplib::Request& req, httplib::Response& res) {
  if (answer_if_unavailable(res, true)) return;
  auto started = ResponsesRun::start(context_, responses_, req.body,
                                     client_.engine().default_sampling_params());
  if (auto* error = std::get_if<ApiError>(&started)) return send_error(res, *error);
  respond_with(req, res, std::move(std::get<std::unique_ptr<ResponsesRun>>(started)));
}

void HttpServer::handle_get_response(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (auto stored = responses_.get(id)) return send_json(res, stored->response);
  send_error(res, ApiError::not_found(fmt::format("Response with id '{}' not found.", id),
                                      "response_id"));
}

void HttpServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  if (answer_if_unavailable(res, false)) return;
  auto parsed = parse_tokenize_request(req.body);
  if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  const TokenizeRequest& r = std::get<TokenizeRequest>(parsed);
  if (client_.engine().config().model.skip_tokenizer_init) {
    return send_error(res, ApiError::bad_request("The server was started with "
                                                 "--skip-tokenizer-init: there is no tokenizer"));
  }
  if (auto error = check_model(r.model, options_.served_model_name)) {
    return send_error(res, *error);
  }
  const LLMEngine& engine = client_.engine();
  std::vector<int32_t> tokens;
  if (r.chat) {
    std::string text;
    try {
      text = engine.apply_chat_template(*r.chat);
    } catch (const std::exception& e) {
      return send_error(res, ApiError::bad_request(e.what()));
    }
    tokens = engine.encode(text, r.add_special_tokens, true);
  } else {
    tokens = engine.encode(*r.prompt, r.add_special_tokens, false);
  }
  json body{{"count", tokens.size()},
            {"max_model_len", engine.max_model_len()},
            {"tokens", tokens}};
  if (r.return_token_strs) {
    json strs = json::array();
    for (int32_t id : tokens) strs.push_back(engine.token_text(id));
    body["token_strs"] = std::move(strs);
  }
  send_json(res, body);
}

void HttpServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  if (answer_if_unavailable(res, false)) return;
  auto parsed = parse_detokenize_request(req.body);
  if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  const DetokenizeRequest& r = std::get<DetokenizeRequest>(parsed);
  if (client_.engine().config().model.skip_tokenizer_init) {
    return send_error(res, ApiError::bad_request("The server was started with "
                                                 "--skip-tokenizer-init: there is no tokenizer"));
  }
  if (auto error = check_model(r.model, options_.served_model_name)) {
    return send_error(res, *error);
  }
  const LLMEngine& engine = client_.engine();
  for (int32_t id : r.tokens) {
    if (id >= engine.vocab_size()) {
      return send_error(
          res,
          ApiError::bad_request(fmt::format("Token id {} is out of vocabulary", id), "tokens"));
    }
  }
  send_json(res, json{{"prompt", engine.decode(r.tokens, false)}});
}

}  // namespace vellum::server

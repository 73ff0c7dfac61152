// The HTTP side of `vellum bench serve`: one streamed completion request at a time per
// thread, sent on the arrival schedule of spec §7.2 with at most max_concurrency in flight.
// Uses cpp-httplib; a new connection per request, as vLLM's client (force_close) does.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "benchserve/dataset.h"
#include "benchserve/metrics.h"
#include "benchserve/response_stream.h"

namespace vellum::benchserve {

using Clock = std::chrono::steady_clock;

// "http://host:port/prefix" split for httplib: the client takes scheme, host and port; the
// path prefix goes before every endpoint.
struct ServerAddress {
  std::string scheme_host_port;  // "http://127.0.0.1:8000"
  std::string path_prefix;       // "" or "/prefix" (no trailing '/')
};

// Throws vellum::Error (kInvalidArgument) unless the URL is http(s)://host[:port][/path].
ServerAddress parse_base_url(const std::string& base_url);

struct ClientConfig {
  ServerAddress server;
  std::string endpoint = "/v1/completions";
  ApiKind api = ApiKind::kCompletions;
  std::string model;    // the "model" field of each request
  std::string api_key;  // sent as "Authorization: Bearer <key>" when not empty
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (--header)
  // Merged into every payload last, so it overrides the defaults (sampling parameters and
  // --extra-body).
  nlohmann::json extra_body = nlohmann::json::object();
  bool ignore_eos = false;
  std::string request_id_prefix;  // "x-request-id" = prefix + request index; none when empty
  double timeout_s = 6 * 3600.0;  // connect/read/write timeout, vLLM's 6-hour session limit
};

// The JSON body vLLM's client sends for one request. Completions: the prompt as token ids;
// chat: the words of prompt_ids_to_words as one user message.
nlohmann::json build_payload(const ClientConfig& config, const SampleRequest& request);

// Sends one request and reads its stream to the end (blocking). Times are seconds after epoch.
// Never throws for a failed request: the failure is in RequestOutput::error.
RequestOutput send_request(const ClientConfig& config, const SampleRequest& request,
                           const std::string& request_id, Clock::time_point epoch);

// GET <prefix>/v1/models and the first model's "id". Throws vellum::Error when the server
// cannot be reached or lists no model.
std::string fetch_first_model_id(const ClientConfig& config);

struct TrafficConfig {
  double request_rate = INFINITY;
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: no limit beyond max_threads
  uint64_t seed = 0;
  // Requests in flight at once when max_concurrency is 0 (one thread each).
  int64_t max_threads = 256;
};

struct BenchmarkRun {
  std::vector<RequestOutput> outputs;  // in request order
  double duration_s = 0.0;             // first send scheduled → last response ended
};

// Called from worker threads after each request finishes, with the number finished so far.
using ProgressCallback = std::function<void(int64_t num_finished)>;

BenchmarkRun run_benchmark(const ClientConfig& config, const TrafficConfig& traffic,
                           const std::vector<SampleRequest>& requests,
                           const ProgressCallback& progress = {});

}  // namespace vellum::benchserve

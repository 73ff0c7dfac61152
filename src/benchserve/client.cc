#include "benchserve/client.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string_view>
#include <thread>

#include "benchserve/arrivals.h"
#include "common/check.h"

namespace vellum::benchserve {

namespace {

constexpr size_t kMaxErrorBodyBytes = 2000;

double seconds_since(Clock::time_point epoch) {
  return std::chrono::duration<double>(Clock::now() - epoch).count();
}

httplib::Client make_client(const ClientConfig& config) {
  httplib::Client cli(config.server.scheme_host_port);
  const auto timeout = static_cast<time_t>(config.timeout_s);
  cli.set_connection_timeout(timeout);
  cli.set_read_timeout(timeout);
  cli.set_write_timeout(timeout);
  return cli;
}

httplib::Headers make_headers(const ClientConfig& config) {
  httplib::Headers headers;
  if (!config.api_key.empty()) headers.emplace("Authorization", "Bearer " + config.api_key);
  for (const auto& [key, value] : config.headers) headers.emplace(key, value);
  return headers;
}

}  // namespace

ServerAddress parse_base_url(const std::string& base_url) {
  auto check = [&](bool ok) {
    VELLUM_CHECK(ok, ErrorCode::kInvalidArgument,
                 "--base-url must look like http://host:port (optionally with a path), got '{}'",
                 base_url);
  };
  const size_t scheme_end = base_url.find("://");
  check(scheme_end != std::string::npos);
  const std::string scheme = base_url.substr(0, scheme_end);
  check(scheme == "http" || scheme == "https");
  const size_t authority_start = scheme_end + 3;
  const size_t path_start = std::min(base_url.find('/', authority_start), base_url.size());
  const std::string_view authority =
      std::string_view(base_url).substr(authority_start, path_start - authority_start);

  // host[:port]; the host may be a bracketed IPv6 address.
  size_t host_len = authority.find(':');
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    check(close != std::string_view::npos);
    host_len = close + 1;
  }
  host_len = std::min(host_len, authority.size());
  const std::string_view port = authority.substr(host_len);
  check(host_len > 0);
  check(port.empty() || (port.size() >= 2 && port.size() <= 6 && port.front() == ':' &&
                         std::all_of(port.begin() + 1, port.end(),
                                     [](char c) { return c >= '0' && c <= '9'; })));

  ServerAddress address;
  address.scheme_host_port = scheme + "://" + std::string(authority);
  address.path_prefix = base_url.substr(path_start);
  while (!address.path_prefix.empty() && address.path_prefix.back() == '/') {
    address.path_prefix.pop_back();
  }
  return address;
}

nlohmann::json build_payload(const ClientConfig& config, const SampleRequest& request) {
  nlohmann::json payload;
  payload["model"] = config.model;
  if (config.api == ApiKind::kCompletions) {
    payload["prompt"] = request.prompt_token_ids;
    payload["temperature"] = 0.0;
    payload["repetition_penalty"] = 1.0;
    payload["max_tokens"] = request.expected_output_len;
  } else {
    payload["messages"] = nlohmann::json::array(
        {{{"role", "user"}, {"content", prompt_ids_to_words(request.prompt_token_ids)}}});
    payload["temperature"] = 0.0;
    payload["max_completion_tokens"] = request.expected_output_len;
  }
  payload["stream"] = true;
  payload["stream_options"] = {{"include_usage", true}};
  if (config.ignore_eos) payload["ignore_eos"] = true;
  for (const auto& [key, value] : config.extra_body.items()) payload[key] = value;
  return payload;
}

RequestOutput send_request(const ClientConfig& config, const SampleRequest& request,
                           const std::string& request_id, Clock::time_point epoch) {
  httplib::Client cli = make_client(config);
  httplib::Request req;
  req.method = "POST";
  req.path = config.server.path_prefix + config.endpoint;
  req.headers = make_headers(config);
  req.headers.emplace("Content-Type", "application/json");
  if (!request_id.empty()) req.headers.emplace("x-request-id", request_id);
  req.body = build_payload(config, request).dump();

  int status = 0;
  std::string error_body;
  const double start = seconds_since(epoch);
  ResponseStreamTracker tracker(config.api, start);
  req.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status == 200) {
      tracker.on_bytes({data, size}, seconds_since(epoch));
    } else if (error_body.size() < kMaxErrorBodyBytes) {
      error_body.append(data, std::min(size, kMaxErrorBodyBytes - error_body.size()));
    }
    return true;
  };
  const httplib::Result result = cli.send(req);
  RequestOutput out = tracker.finish(seconds_since(epoch));
  out.prompt_len = request.prompt_len;
  if (result) out.http_status = result->status;
  if (!result) {
    out.success = false;
    out.error = fmt::format("HTTP request to {}{} failed: {}", config.server.scheme_host_port,
                            req.path, httplib::to_string(result.error()));
  } else if (result->status != 200) {
    out.success = false;
    out.error = fmt::format("HTTP {} {}: {}", result->status, result->reason, error_body);
  }
  return out;
}

std::string fetch_first_model_id(const ClientConfig& config) {
  httplib::Client cli = make_client(config);
  const std::string path = config.server.path_prefix + "/v1/models";
  const httplib::Result result = cli.Get(path, make_headers(config));
  VELLUM_CHECK(result, ErrorCode::kIo, "cannot reach {}{} to ask for the model name: {}; start "
               "the server, or check --base-url/--host/--port",
               config.server.scheme_host_port, path, httplib::to_string(result.error()));
  VELLUM_CHECK(result->status == 200, ErrorCode::kIo, "GET {} answered HTTP {}: {}; pass --model",
               path, result->status, result->body.substr(0, kMaxErrorBodyBytes));
  const nlohmann::json models = nlohmann::json::parse(result->body, nullptr, false);
  VELLUM_CHECK(!models.is_discarded() && models.contains("data") && models["data"].is_array() &&
                   !models["data"].empty() && models["data"][0].contains("id") &&
                   models["data"][0]["id"].is_string(),
               ErrorCode::kNotFound, "GET {} listed no model id; pass --model", path);
  return models["data"][0]["id"].get<std::string>();
}

BenchmarkRun run_benchmark(const ClientConfig& config, const TrafficConfig& traffic,
                           const std::vector<SampleRequest>& requests,
                           const ProgressCallback& progress) {
  const auto num_requests = static_cast<int64_t>(requests.size());
  const std::vector<double> send_times =
      arrival_times(num_requests, traffic.request_rate, traffic.burstiness, traffic.seed);
  // Workers take requests in order and each waits for its send time, so a request that finds
  // every worker busy waits, like vLLM's tasks waiting on the concurrency semaphore.
  const int64_t limit = traffic.max_concurrency > 0 ? traffic.max_concurrency : traffic.max_threads;
  const int64_t num_workers = std::max<int64_t>(1, std::min(limit, num_requests));

  BenchmarkRun run;
  run.outputs.resize(requests.size());
  std::atomic<int64_t> next{0}, num_finished{0};
  const Clock::time_point epoch = Clock::now();
  auto worker = [&] {
    for (int64_t i = next++; i < num_requests; i = next++) {
      const auto idx = static_cast<size_t>(i);
      std::this_thread::sleep_until(
          epoch + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(send_times[idx])));
      const std::string request_id =
          config.request_id_prefix.empty() ? "" : config.request_id_prefix + std::to_string(i);
      run.outputs[idx] = send_request(config, requests[idx], request_id, epoch);
      const int64_t finished = ++num_finished;
      if (progress) progress(finished);
    }
  };
  std::vector<std::jthread> threads;
  threads.reserve(static_cast<size_t>(num_workers));
  for (int64_t t = 0; t < num_workers; ++t) threads.emplace_back(worker);
  threads.clear();  // joins
  run.duration_s = seconds_since(epoch);
  return run;
}

}  // namespace vellum::benchserve

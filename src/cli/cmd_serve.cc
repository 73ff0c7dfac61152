// `vellum serve MODEL`: the OpenAI-compatible HTTP server (vLLM's `vllm serve`). The listener
// starts at once and answers 503 while the model loads; SIGINT/SIGTERM stop accepting, let
// in-flight requests finish for --shutdown-grace-period seconds, abort the rest and exit 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "common/check.h"
#include "common/logging.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "vellum/engine_client.h"

namespace vellum::cli {
namespace {

struct ServeOptions {
  std::string model;
  server::ServerOptions server;
  std::string chat_template;
  bool enable_prefix_caching = false;  // the default; the flag exists for vLLM's command lines
  double shutdown_grace_seconds = 5.0;
  std::string metrics_prefix = "vellum";
  double log_interval_seconds = 10.0;
  // vLLM's --structured-outputs-config.backend: which of vLLM's grammar libraries to use. Vellum
  // has one grammar engine of its own; the names are accepted so vLLM command lines run, and the
  // startup log says which engine serves them.
  std::string structured_outputs_backend = "auto";
  bool enable_prompt_tokens_details = false;  // always on; the flag exists for vLLM's command lines
  EngineConfig config;
  EngineOptionStrings strings;
};

bool valid_metric_prefix(const std::string& prefix) {
  if (prefix.empty() || std::isdigit(static_cast<unsigned char>(prefix[0]))) return false;
  for (char c : prefix) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// The API key: --api-key, else $VLLM_API_KEY, else $VELLUM_API_KEY (read once, here).
std::string api_key_from_environment() {
  for (const char* name : {"VLLM_API_KEY", "VELLUM_API_KEY"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return value;
  }
  return "";
}

int run_serve(ServeOptions& o) {
  o.config.model.model = o.model;
  o.config.model.chat_template = o.chat_template;
  finish_engine_options(o.config, o.strings);
  VELLUM_CHECK(valid_metric_prefix(o.metrics_prefix), ErrorCode::kInvalidArgument,
               "--metrics-prefix '{}' must match [a-zA-Z_][a-zA-Z0-9_]*", o.metrics_prefix);
  VELLUM_CHECK(o.shutdown_grace_seconds >= 0, ErrorCode::kInvalidArgument,
               "--shutdown-grace-period must be >= 0 seconds");
  // Under mpirun only rank 0 serves HTTP; the others run their share of every step.
  if (auto code = run_if_worker_rank(o.config)) return *code;
  // vLLM serves the model under the name it was given on the command line.
  if (o.server.served_model_name.empty()) o.server.served_model_name = o.model;
  o.config.model.served_model_name = o.server.served_model_name;
  o.server.model_path = o.model;
  if (o.server.api_key.empty()) o.server.api_key = api_key_from_environment();
  VELLUM_CHECK(!o.server.chat_parsers.enable_auto_tool_choice ||
                   !o.server.chat_parsers.tool_call_parser.empty(),
               ErrorCode::kInvalidArgument,
               "--enable-auto-tool-choice needs --tool-call-parser (hermes, llama3_json or "
               "mistral) to say how the model writes its tool calls");
  if (o.structured_outputs_backend != "auto") {
    VELLUM_LOG_WARN("--structured-outputs-config.backend {}: structured outputs are served by "
                    "Vellum's own grammar engine (the same for every backend name)",
                    o.structured_outputs_backend);
  }
  // Testing only (the fault-injection tests of the server): read once, here.
  if (const char* id = std::getenv("VELLUM_FAULT_INJECT_REQUEST_ID"); id != nullptr) {
    o.config.fault_injection.request_id_substring = id;
    const char* fatal = std::getenv("VELLUM_FAULT_INJECT_FATAL");
    o.config.fault_injection.fatal = fatal != nullptr && std::string(fatal) == "1";
  }
  // Each connection being served holds an HTTP thread for as long as its request runs, so there
  // must be room for every sequence the engine can run plus the clients still waiting.
  if (o.server.num_http_threads <= 0) {
    o.server.num_http_threads =
        static_cast<int>(std::max<int64_t>(64, 2 * o.config.scheduler.max_num_seqs));
  }

  // Signals are taken by sigtimedwait below; block them before any thread starts so that every
  // thread inherits the mask. A shell starts background jobs with SIGINT ignored, and an ignored
  // signal is dropped even while blocked: restore the default so `kill -INT` stops the server.
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<server::ServerMetrics> metrics;  // outlives the engine thread (declared first)
  EngineClient client(o.config);
  server::HttpServer http(o.server, client);
  const auto port = http.bind();
  if (!port) {
    std::fprintf(stderr, "error: cannot listen on %s:%d (is the port in use? try --port)\n",
                 o.server.host.c_str(), o.server.port);
    client.shutdown(std::chrono::milliseconds(0));
    return 1;
  }
  std::thread http_thread([&http] { http.serve(); });
  std::fprintf(stderr, "vellum serve: listening on http://%s:%d, loading %s\n",
               o.server.host.c_str(), *port, o.model.c_str());

  const auto grace = std::chrono::milliseconds(
      static_cast<int64_t>(o.shutdown_grace_seconds * 1000.0));
  int exit_code = 0;
  bool ready = false;
  auto last_log = std::chrono::steady_clock::now();
  int64_t last_logged_tokens = -1;  // prompt + generated tokens at the last log line
  const timespec tick{0, 200'000'000};
  while (true) {
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal == SIGINT || signal == SIGTERM) {
      std::fprintf(stderr, "vellum serve: %s received, shutting down (grace %.1f s)\n",
                   signal == SIGINT ? "SIGINT" : "SIGTERM", o.shutdown_grace_seconds);
      break;
    }
    const EngineClient::State state = client.state();
    if (state == EngineClient::State::kFailed || state == EngineClient::State::kStopped) {
      std::fprintf(stderr, "error: the engine %s: %s\n",
                   ready ? "died" : "failed to load the model", client.failure().c_str());
      exit_code = 1;
      break;
    }
    if (!ready && state == EngineClient::State::kReady) {
      const LLMEngine& engine = client.engine();
      metrics = std::make_unique<server::ServerMetrics>(server::MetricsOptions{
          o.metrics_prefix, o.server.served_model_name, engine.max_model_len(),
          engine.config().cache});
      http.on_engine_ready(metrics.get());
      ready = true;
      std::fprintf(stderr, "vellum serve: model loaded (max_model_len %lld); serving '%s'\n",
                   static_cast<long long>(engine.max_model_len()),
                   o.server.served_model_name.c_str());
    }
    const auto now = std::chrono::steady_clock::now();
    if (ready && o.log_interval_seconds > 0 &&
        std::chrono::duration<double>(now - last_log).count() >= o.log_interval_seconds) {
      last_log = now;
      // vLLM logs the line only while there is something to report: nothing when idle.
      const EngineStats stats = client.stats();
      const int64_t tokens = stats.prompt_tokens + stats.generation_tokens;
      const std::string line = metrics->log_line(
          stats, std::chrono::duration<double>(now.time_since_epoch()).count());
      if (tokens != last_logged_tokens || stats.num_running + stats.num_waiting > 0) {
        VELLUM_LOG_INFO("{}", line);
      }
      last_logged_tokens = tokens;
    }
  }
  http.shutdown(exit_code == 0 ? grace : std::chrono::milliseconds(0));
  http_thread.join();
  return exit_code;
}

}  // namespace

CommandRunner add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  auto o = std::make_shared<ServeOptions>();
  cmd->add_option("model", o->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_option("--host", o->server.host, "Address to listen on");
  cmd->add_option("--port", o->server.port, "Port to listen on (0: any free port)");
  cmd->add_option("--api-key", o->server.api_key,
                  "Require 'Authorization: Bearer KEY' on /v1 (default: $VLLM_API_KEY, then "
                  "$VELLUM_API_KEY)");
  cmd->add_option("--served-model-name", o->server.served_model_name,
                  "Model name in the API (default: the MODEL argument)");
  cmd->add_option("--chat-template", o->chat_template,
                  "Jinja chat template file (default: the model's)");
  cmd->add_flag("--enable-prefix-caching", o->enable_prefix_caching,
                "Enable prefix caching (the default)");
  cmd->add_option("--shutdown-grace-period", o->shutdown_grace_seconds,
                  "Seconds in-flight requests may finish after SIGINT/SIGTERM");
  cmd->add_option("--metrics-prefix", o->metrics_prefix,
                  "Prefix of the /metrics names ('vllm' for vLLM dashboards)");
  cmd->add_option("--stats-log-interval", o->log_interval_seconds,
                  "Seconds between throughput log lines at --log-level info (0: off)");
  cmd->add_flag("--enable-auto-tool-choice", o->server.chat_parsers.enable_auto_tool_choice,
                "Let the model call tools by itself (tool_choice \"auto\"); needs "
                "--tool-call-parser");
  cmd->add_option("--tool-call-parser", o->server.chat_parsers.tool_call_parser,
                  "How tool calls are parsed out of replies: hermes, llama3_json or mistral")
      ->check(CLI::IsMember({"hermes", "llama3_json", "mistral"}));
  cmd->add_option("--reasoning-parser", o->server.chat_parsers.reasoning_parser,
                  "Separate <think>...</think> into reasoning_content: deepseek_r1 or qwen3")
      ->check(CLI::IsMember({"deepseek_r1", "qwen3"}));
  o->server.num_http_threads = 0;
  cmd->add_option("--http-threads", o->server.num_http_threads,
                  "Connections served at once (default: 2 x --max-num-seqs, at least 64)");
  cmd->add_option("--http-max-queued", o->server.max_queued_connections,
                  "Connections that may wait for an HTTP thread; more are answered 503")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--http-request-timeout", o->server.request_timeout_seconds,
                  "Seconds a connection has to deliver a complete request (headers and body); "
                  "slower ones are closed")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--root-path", o->server.root_path,
                  "Path prefix of a proxy in front of the server, e.g. /llm: every route also "
                  "answers under it")
      ->check([](const std::string& path) -> std::string {
        if (path.empty() || path.front() != '/') return "must start with '/', e.g. /llm";
        return "";
      });
  cmd->add_flag("--enable-force-include-usage", o->server.force_include_usage,
                "Usage on every streamed chunk and at the end of every stream, whatever "
                "stream_options say");
  cmd->add_flag("--enable-per-request-metrics", o->server.per_request_metrics,
                "A \"metrics\" object (time to first token, queue time, inter-token latency, "
                "tokens per second) in every completion response and final usage chunk");
  cmd->add_flag("--return-tokens-as-token-ids", o->server.return_tokens_as_token_ids,
                "Logprob tokens as \"token_id:<id>\" by default (the request field of that "
                "name)");
  cmd->add_flag("--enable-prompt-tokens-details", o->enable_prompt_tokens_details,
                "Usage carries prompt_tokens_details (cached tokens); always on in Vellum, the "
                "flag exists for vLLM's command lines");
  cmd->add_option("--structured-outputs-config.backend", o->structured_outputs_backend,
                  "vLLM's structured-output backend names (auto, xgrammar, guidance, outlines, "
                  "lm-format-enforcer) are accepted; Vellum's own grammar engine serves them all")
      ->check(CLI::IsMember({"auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"}));
  cmd->add_option("--seed", o->config.model.seed,
                  "Seed of the random generators of requests that bring no seed of their own");
  add_engine_options(*cmd, o->config, o->strings);
  return [o] { return run_serve(*o); };
}

}  // namespace vellum::cli

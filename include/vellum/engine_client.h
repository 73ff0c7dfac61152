// EngineClient: the thread-safe front of an LLMEngine for servers (DESIGN.md §4; vLLM's
// AsyncLLM + EngineCore split, in one process).
//
// The engine core runs on its own thread, which owns the LLMEngine: it loads the model, then loops
// — take new requests and aborts from the input queue, run one step, hand each request's outputs
// to its RequestStream — and sleeps while there is no work. Any other thread may submit, abort,
// read stats and use the engine's const tokenizer methods (once ready).
//
//   EngineClient client(config);          // returns at once; the model loads in the background
//   if (!client.wait_until_ready()) ...   // client.failure() says why
//   auto stream = client.submit("req-1", prompt, params);
//   while (!stream->done())
//     for (RequestOutput& out : stream->wait(std::chrono::milliseconds(100))) ...;
//   client.abort("req-1");                // e.g. the HTTP client went away
//
// A request's final output (finished = true, also for aborts) is always delivered, so a reader
// that waits until done() never hangs on a request the engine knows about.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vellum/config.h"
#include "vellum/engine.h"
#include "vellum/outputs.h"
#include "vellum/sampling_params.h"

namespace vellum {

// The outputs of one request, passed from the engine thread to the reader.
class RequestStream {
 public:
  explicit RequestStream(std::string request_id) : request_id_(std::move(request_id)) {}

  const std::string& request_id() const { return request_id_; }

  // Waits up to `timeout` for outputs and returns every output queued so far (empty on timeout or
  // when done). Outputs arrive in step order; with RequestOutputKind::kDelta each carries only
  // what is new.
  std::vector<RequestOutput> wait(std::chrono::milliseconds timeout);

  // True once the final output (or an error) has been taken by wait().
  bool done() const;
  // Set when the engine rejected the request (its add_request message, vLLM's wording) or the
  // engine failed; the stream is then done without a final output.
  std::optional<std::string> error() const;
  // With error(): true when the engine failed (a server answers 500), false when it rejected
  // the request (400).
  bool engine_failed() const;

  // Called after every output or error queued from now on (on the engine thread, without the
  // stream's lock), and at once if some are already queued: lets a reader wait on something else
  // than wait(), e.g. an event loop's file descriptor. It must be cheap and must not block.
  void set_notifier(std::function<void()> notifier);

  // Engine side.
  void push(RequestOutput output);
  void fail(std::string message, bool engine_failed = false);

 private:
  const std::string request_id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool final_queued_ = false;   // the finished output (or an error) is in queue_ / error_
  bool final_taken_ = false;
  std::optional<std::string> error_;
  std::function<void()> notifier_;
  bool engine_failed_ = false;
};

// What the engine thread reports after every step, for metrics.
struct StepReport {
  EngineStats stats;                          // after the step
  int64_t num_scheduled_tokens = 0;           // prompt + generated tokens computed in the step
  const std::vector<RequestOutput>* outputs = nullptr;  // this step's outputs (valid during the call)
};

class EngineClient {
 public:
  enum class State { kLoading, kReady, kFailed, kStopped };

  // Starts the engine thread, which creates the LLMEngine (loads the model, sizes the KV cache).
  explicit EngineClient(EngineConfig config);
  // Aborts whatever is still running and joins the engine thread.
  ~EngineClient();
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  State state() const;
  // Why the engine failed to load or died (kFailed); empty otherwise.
  std::string failure() const;
  // Blocks until the engine is ready (true) or has failed or stopped (false).
  bool wait_until_ready();

  // The engine, for its const methods (tokenizer, chat template, limits, config), which are safe
  // to call from any thread. Only valid while state() == kReady or after; throws otherwise.
  const LLMEngine& engine() const;

  // Queues a request for the engine thread. The stream receives its outputs; if the engine rejects
  // the request, the stream's error() says why. The request id must be unique among unfinished
  // requests. After shutdown() has begun, the stream fails at once with "the server is shutting
  // down".
  std::shared_ptr<RequestStream> submit(std::string request_id, Prompt prompt,
                                        SamplingParams params, int priority = 0,
                                        std::string cache_salt = {});
  // Aborts a request wherever it is; its final output (finish_reason "abort") still reaches its
  // stream, and its KV blocks are freed within one step. Unknown or finished ids are ignored.
  void abort(const std::string& request_id);

  // The engine's stats after the latest step (thread-safe snapshot).
  EngineStats stats() const;
  // Requests submitted and not yet finished (queued for the engine thread or inside the engine).
  int64_t num_unfinished() const;

  // Called on the engine thread after every step that ran. Set it before submitting work.
  void set_step_observer(std::function<void(const StepReport&)> observer);

  // Stops accepting requests, lets in-flight ones finish for up to `grace`, aborts the rest
  // (their streams get their final outputs) and stops the engine thread. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

 private:
  struct Command;
  void run(EngineConfig config);
  void loop();
  void fail_all(const std::string& message);

  mutable std::mutex mu_;
  std::condition_variable cv_;        // engine thread: new commands or shutdown
  std::condition_variable ready_cv_;  // waiters of wait_until_ready()
  State state_ = State::kLoading;
  std::string failure_;
  std::unique_ptr<LLMEngine> engine_;
  std::vector<std::unique_ptr<Command>> commands_;
  std::unordered_map<std::string, std::shared_ptr<RequestStream>> streams_;  // engine thread only
  EngineStats stats_;
  int64_t num_unfinished_ = 0;
  bool accepting_ = true;
  bool stop_ = false;                 // abort everything and exit the loop
  std::optional<std::chrono::steady_clock::time_point> drain_deadline_;
  std::function<void(const StepReport&)> observer_;
  std::thread thread_;
};

}  // namespace vellum

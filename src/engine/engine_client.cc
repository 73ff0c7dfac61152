// EngineClient: the engine core thread and the queues between it and the server's threads.
#include "vellum/engine_client.h"

#include <exception>
#include <utility>

#include "common/check.h"
#include "common/logging.h"

namespace vellum {

// ---- RequestStream ----------------------------------------------------------------------------

std::vector<RequestOutput> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || final_queued_; });
  std::vector<RequestOutput> outputs;
  outputs.reserve(queue_.size());
  while (!queue_.empty()) {
    outputs.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (final_queued_) final_taken_ = true;
  return outputs;
}

bool RequestStream::done() const {
  std::lock_guard lock(mu_);
  return final_taken_;
}

std::optional<std::string> RequestStream::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void RequestStream::set_notifier(std::function<void()> notifier) {
  bool pending = false;
  {
    std::lock_guard lock(mu_);
    notifier_ = notifier;
    pending = !queue_.empty() || (final_queued_ && !final_taken_);
  }
  if (pending && notifier) notifier();
}

void RequestStream::push(RequestOutput output) {
  std::function<void()> notifier;
  {
    std::lock_guard lock(mu_);
    if (final_queued_) return;
    final_queued_ = output.finished;
    queue_.push_back(std::move(output));
    notifier = notifier_;
  }
  cv_.notify_all();
  if (notifier) notifier();
}

bool RequestStream::engine_failed() const {
  std::lock_guard lock(mu_);
  return engine_failed_;
}

void RequestStream::fail(std::string message, bool engine_failed) {
  std::function<void()> notifier;
  {
    std::lock_guard lock(mu_);
    if (final_queued_) return;
    error_ = std::move(message);
    engine_failed_ = engine_failed;
    final_queued_ = true;
    notifier = notifier_;
  }
  cv_.notify_all();
  if (notifier) notifier();
}

// ---- EngineClient -----------------------------------------------------------------------------

struct EngineClient::Command {
  enum class Kind { kAdd, kAbort } kind = Kind::kAdd;
  std::string request_id;
  Prompt prompt;
  SamplingParams params;
  int priority = 0;
  std::string cache_salt;
  std::shared_ptr<RequestStream> stream;
};

EngineClient::EngineClient(EngineConfig config)
    : thread_([this, config = std::move(config)]() mutable { run(std::move(config)); }) {}

EngineClient::~EngineClient() { shutdown(std::chrono::milliseconds(0)); }

EngineClient::State EngineClient::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

std::string EngineClient::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

bool EngineClient::wait_until_ready() {
  std::unique_lock lock(mu_);
  ready_cv_.wait(lock, [&] { return state_ != State::kLoading; });
  return state_ == State::kReady;
}

const LLMEngine& EngineClient::engine() const {
  std::lock_guard lock(mu_);
  VELLUM_CHECK(engine_ != nullptr, ErrorCode::kInternal,
               "the engine is not ready yet (the model is still loading or failed to load)");
  return *engine_;
}

std::shared_ptr<RequestStream> EngineClient::submit(std::string request_id, Prompt prompt,
                                                    SamplingParams params, int priority,
                                                    std::string cache_salt) {
  auto stream = std::make_shared<RequestStream>(request_id);
  {
    std::lock_guard lock(mu_);
    if (state_ == State::kFailed) {
      stream->fail("the engine failed: " + failure_, true);
      return stream;
    }
    if (!accepting_) {
      stream->fail("the server is shutting down");
      return stream;
    }
    auto command = std::make_unique<Command>();
    command->kind = Command::Kind::kAdd;
    command->request_id = std::move(request_id);
    command->prompt = std::move(prompt);
    command->params = std::move(params);
    command->priority = priority;
    command->cache_salt = std::move(cache_salt);
    command->stream = stream;
    commands_.push_back(std::move(command));
    ++num_unfinished_;
  }
  cv_.notify_one();
  return stream;
}

void EngineClient::abort(const std::string& request_id) {
  {
    std::lock_guard lock(mu_);
    auto command = std::make_unique<Command>();
    command->kind = Command::Kind::kAbort;
    command->request_id = request_id;
    commands_.push_back(std::move(command));
  }
  cv_.notify_one();
}

EngineStats EngineClient::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

int64_t EngineClient::num_unfinished() const {
  std::lock_guard lock(mu_);
  return num_unfinished_;
}

void EngineClient::set_step_observer(std::function<void(const StepReport&)> observer) {
  std::lock_guard lock(mu_);
  observer_ = std::move(observer);
}

void EngineClient::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    if (!drain_deadline_ || deadline < *drain_deadline_) drain_deadline_ = deadline;
    if (grace.count() == 0) stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EngineClient::run(EngineConfig config) {
  try {
    auto engine = LLMEngine::create(config);
    std::lock_guard lock(mu_);
    engine_ = std::move(engine);
    stats_ = engine_->stats();
    state_ = State::kReady;
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mu_);
      state_ = State::kFailed;
      failure_ = e.what();
    }
    ready_cv_.notify_all();
    fail_all("the engine failed to load: " + std::string(e.what()));
    return;
  }
  ready_cv_.notify_all();
  try {
    loop();
  } catch (const std::exception& e) {
    VELLUM_LOG_ERROR("engine core stopped: {}", e.what());
    {
      std::lock_guard lock(mu_);
      state_ = State::kFailed;
      failure_ = e.what();
    }
    fail_all("the engine failed: " + std::string(e.what()));
    return;
  }
  std::lock_guard lock(mu_);
  state_ = State::kStopped;
}

void EngineClient::fail_all(const std::string& message) {
  std::vector<std::unique_ptr<Command>> commands;
  {
    std::lock_guard lock(mu_);
    commands.swap(commands_);
    accepting_ = false;
    num_unfinished_ = 0;
  }
  for (auto& command : commands) {
    if (command->stream) command->stream->fail(message, true);
  }
  for (auto& [id, stream] : streams_) stream->fail(message, true);
  streams_.clear();
}

void EngineClient::loop() {
  bool aborted_all = false;
  // The token counters only move in step(), so the last step's stats are the next one's "before".
  EngineStats before = engine_->stats();
  // Under mpirun an idle engine tells the other ranks it is alive this often (0: one process).
  const auto keep_alive_interval =
      std::chrono::duration<double>(engine_->keep_alive_interval_seconds());
  for (;;) {
    std::vector<std::unique_ptr<Command>> commands;
    bool draining = false;
    bool past_deadline = false;
    bool idle_beat = false;
    {
      std::unique_lock lock(mu_);
      if (!engine_->has_unfinished_requests()) {
        auto woken = [&] { return stop_ || drain_deadline_ || !commands_.empty(); };
        if (keep_alive_interval.count() > 0) {
          idle_beat = !cv_.wait_for(lock, keep_alive_interval, woken);
        } else {
          cv_.wait(lock, woken);
        }
      }
      commands.swap(commands_);
      draining = drain_deadline_.has_value();
      past_deadline = stop_ || (draining && std::chrono::steady_clock::now() >= *drain_deadline_);
    }

    for (auto& command : commands) {
      if (command->kind == Command::Kind::kAbort) {
        engine_->abort_request(command->request_id);
        continue;
      }
      if (auto error = engine_->add_request(command->request_id, command->prompt,
                                            command->params, command->priority,
                                            command->cache_salt)) {
        {
          std::lock_guard lock(mu_);
          --num_unfinished_;
        }
        command->stream->fail(std::move(*error));
        continue;
      }
      streams_[command->request_id] = command->stream;
    }

    if (past_deadline && !aborted_all) {
      for (const auto& [id, stream] : streams_) engine_->abort_request(id);
      aborted_all = true;
    }
    if (draining && streams_.empty() && !engine_->has_unfinished_requests()) break;
    if (idle_beat) engine_->keep_alive();  // throws, ending the engine, when a rank is gone
    if (!engine_->has_unfinished_requests()) continue;

    std::vector<RequestOutput> outputs = engine_->step();
    const EngineStats after = engine_->stats();
    // Stats and counts first, so that a reader woken by its final output sees them updated.
    int64_t finished = 0;
    for (const RequestOutput& output : outputs) {
      finished += output.finished && streams_.contains(output.request_id) ? 1 : 0;
    }
    std::function<void(const StepReport&)> observer;
    {
      std::lock_guard lock(mu_);
      stats_ = after;
      num_unfinished_ -= finished;
      observer = observer_;
    }
    if (observer) {
      StepReport report;
      report.stats = after;
      // The scheduler's count: a chunked prompt counts chunk by chunk.
      report.num_scheduled_tokens = after.scheduled_tokens - before.scheduled_tokens;
      report.outputs = &outputs;
      observer(report);
    }
    before = after;
    for (RequestOutput& output : outputs) {
      auto it = streams_.find(output.request_id);
      if (it == streams_.end()) continue;
      const bool last = output.finished;
      it->second->push(std::move(output));
      if (last) streams_.erase(it);
    }
  }
}

}  // namespace vellum

// LLMEngine (vellum/engine.h) for the synchronous LLM / LLMEngine, and EngineClient
// (vellum/engine_client.h) for the asyncio AsyncLLM.
#include <pybind11/stl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include "bindings.h"
#include "vellum/engine.h"
#include "vellum/engine_client.h"
#include "vellum/status.h"

namespace py = pybind11;

namespace vellum::python {
namespace {

using ReleaseGil = py::call_guard<py::gil_scoped_release>;

// An eventfd that request streams signal from the engine thread (a plain write(2): no GIL) and
// that an asyncio loop watches with add_reader. Shared by the streams that use it, so the fd stays
// open until the last of them is gone, whatever order Python frees things in.
class EventNotifier {
 public:
  EventNotifier() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) {
      throw Error(ErrorCode::kIo, std::string("eventfd failed: ") + std::strerror(errno));
    }
  }
  ~EventNotifier() { ::close(fd_); }
  EventNotifier(const EventNotifier&) = delete;
  EventNotifier& operator=(const EventNotifier&) = delete;

  int fileno() const { return fd_; }
  void notify() const {
    const uint64_t one = 1;
    // Only fails when the counter would overflow, i.e. when a wake-up is pending anyway.
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof(one));
  }
  // Clears pending wake-ups; true if there was one.
  bool drain() const {
    uint64_t count = 0;
    return ::read(fd_, &count, sizeof(count)) == static_cast<ssize_t>(sizeof(count));
  }

 private:
  int fd_;
};

// vLLM's ModelConfig.get_diff_sampling_param(): the sampling fields the model's
// generation_config.json sets, by SamplingParams name, for LLM.get_default_sampling_params().
py::dict diff_sampling_params(const LLMEngine& engine) {
  const SamplingParams base;
  const SamplingParams model = engine.default_sampling_params();
  py::dict out;
  if (model.temperature != base.temperature) out["temperature"] = model.temperature;
  if (model.top_p != base.top_p) out["top_p"] = model.top_p;
  if (model.top_k != base.top_k) out["top_k"] = model.top_k;
  if (model.min_p != base.min_p) out["min_p"] = model.min_p;
  if (model.repetition_penalty != base.repetition_penalty) {
    out["repetition_penalty"] = model.repetition_penalty;
  }
  if (const std::optional<int64_t> max_tokens = engine.default_max_tokens()) {
    out["max_tokens"] = *max_tokens;
  }
  return out;
}

ChatTemplateRequest make_chat_request(std::string messages_json, std::string tools_json,
                                      std::string kwargs_json, std::string chat_template,
                                      bool add_generation_prompt, bool continue_final_message) {
  ChatTemplateRequest r;
  r.messages_json = std::move(messages_json);
  r.tools_json = std::move(tools_json);
  r.kwargs_json = std::move(kwargs_json);
  r.chat_template = std::move(chat_template);
  r.add_generation_prompt = add_generation_prompt;
  r.continue_final_message = continue_final_message;
  return r;
}

// The const (tokenizer and limits) part of an engine, shared by both bindings.
template <typename Class, typename GetEngine>
void bind_engine_queries(Class& c, GetEngine get) {
  c.def(
       "encode",
       [get](typename Class::type& self, const std::string& text, bool add_special,
             bool parse_special) {
         py::gil_scoped_release release;
         return get(self).encode(text, add_special, parse_special);
       },
       py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = false)
      .def(
          "decode",
          [get](typename Class::type& self, const std::vector<int32_t>& ids,
                bool skip_special_tokens) {
            std::string text;
            {
              py::gil_scoped_release release;
              text = get(self).decode(ids, skip_special_tokens);
            }
            return utf8(text);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = true)
      .def("token_text",
           [get](typename Class::type& self, int32_t id) { return utf8(get(self).token_text(id)); })
      .def("bos_token_id",
           [get](typename Class::type& self) { return get(self).bos_token_id(); })
      .def("eos_token_id",
           [get](typename Class::type& self) { return get(self).eos_token_id(); })
      .def("max_model_len",
           [get](typename Class::type& self) { return get(self).max_model_len(); })
      .def("vocab_size", [get](typename Class::type& self) { return get(self).vocab_size(); })
      .def("has_chat_template",
           [get](typename Class::type& self) { return get(self).has_chat_template(); })
      .def(
          "apply_chat_template",
          [get](typename Class::type& self, std::string messages_json, std::string tools_json,
                std::string kwargs_json, std::string chat_template, bool add_generation_prompt,
                bool continue_final_message) {
            const ChatTemplateRequest request = make_chat_request(
                std::move(messages_json), std::move(tools_json), std::move(kwargs_json),
                std::move(chat_template), add_generation_prompt, continue_final_message);
            std::string text;
            {
              py::gil_scoped_release release;
              text = get(self).apply_chat_template(request);
            }
            return utf8(text);
          },
          py::arg("messages_json"), py::arg("tools_json") = "", py::arg("kwargs_json") = "",
          py::arg("chat_template") = "", py::arg("add_generation_prompt") = true,
          py::arg("continue_final_message") = false)
      .def("diff_sampling_params",
           [get](typename Class::type& self) { return diff_sampling_params(get(self)); })
      .def("config", [get](typename Class::type& self) { return get(self).config(); });
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<EngineStats>(m, "EngineStats")
      .def_readonly("num_running", &EngineStats::num_running)
      .def_readonly("num_waiting", &EngineStats::num_waiting)
      .def_readonly("kv_cache_usage", &EngineStats::kv_cache_usage)
      .def_readonly("prefix_cache_queries", &EngineStats::prefix_cache_queries)
      .def_readonly("prefix_cache_hits", &EngineStats::prefix_cache_hits)
      .def_readonly("num_preemptions", &EngineStats::num_preemptions)
      .def_readonly("prompt_tokens", &EngineStats::prompt_tokens)
      .def_readonly("generation_tokens", &EngineStats::generation_tokens)
      .def_readonly("scheduled_tokens", &EngineStats::scheduled_tokens)
      .def_readonly("num_kv_blocks", &EngineStats::num_kv_blocks)
      .def_readonly("block_size", &EngineStats::block_size)
      .def_readonly("kv_cache_dtype", &EngineStats::kv_cache_dtype)
      .def_readonly("spec_num_drafts", &EngineStats::spec_num_drafts)
      .def_readonly("spec_num_draft_tokens", &EngineStats::spec_num_draft_tokens)
      .def_readonly("spec_num_accepted_tokens", &EngineStats::spec_num_accepted_tokens)
      .def_readonly("spec_num_accepted_tokens_per_pos",
                    &EngineStats::spec_num_accepted_tokens_per_pos);

  // One thread drives an LLMEngine (the Python LLMEngine / LLM call it from their own thread).
  py::class_<LLMEngine> engine(m, "LLMEngine");
  engine
      .def_static("create", &LLMEngine::create, py::arg("config"), ReleaseGil())
      .def("add_request", &LLMEngine::add_request, py::arg("request_id"), py::arg("prompt"),
           py::arg("params"), py::arg("priority") = 0, py::arg("cache_salt") = "", ReleaseGil())
      .def("abort_request", &LLMEngine::abort_request, py::arg("request_id"))
      .def("step", &LLMEngine::step, ReleaseGil())
      .def("has_unfinished_requests", &LLMEngine::has_unfinished_requests)
      .def("stats", &LLMEngine::stats);
  bind_engine_queries(engine, [](LLMEngine& e) -> LLMEngine& { return e; });

  py::class_<EventNotifier, std::shared_ptr<EventNotifier>>(m, "EventNotifier")
      .def(py::init<>())
      .def("fileno", &EventNotifier::fileno)
      .def("notify", &EventNotifier::notify)
      .def("drain", &EventNotifier::drain);

  py::class_<RequestStream, std::shared_ptr<RequestStream>>(m, "RequestStream")
      .def_property_readonly("request_id", &RequestStream::request_id)
      .def(
          "wait",
          [](RequestStream& s, double timeout_s) {
            return s.wait(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)));
          },
          py::arg("timeout_s") = 0.0, ReleaseGil())
      .def("done", &RequestStream::done)
      .def("error", &RequestStream::error)
      .def("set_notifier", [](RequestStream& s, std::shared_ptr<EventNotifier> notifier) {
        s.set_notifier([notifier] { notifier->notify(); });
      });

  py::class_<EngineClient> client(m, "EngineClient");
  py::enum_<EngineClient::State>(client, "State")
      .value("LOADING", EngineClient::State::kLoading)
      .value("READY", EngineClient::State::kReady)
      .value("FAILED", EngineClient::State::kFailed)
      .value("STOPPED", EngineClient::State::kStopped);
  client
      .def(py::init<EngineConfig>(), py::arg("config"))
      .def("state", &EngineClient::state)
      .def("failure", &EngineClient::failure)
      .def("wait_until_ready", &EngineClient::wait_until_ready, ReleaseGil())
      .def("submit", &EngineClient::submit, py::arg("request_id"), py::arg("prompt"),
           py::arg("params"), py::arg("priority") = 0, py::arg("cache_salt") = "")
      .def("abort", &EngineClient::abort, py::arg("request_id"))
      .def("stats", &EngineClient::stats)
      .def("num_unfinished", &EngineClient::num_unfinished)
      .def(
          "shutdown",
          [](EngineClient& c, double grace_s) {
            c.shutdown(std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000.0)));
          },
          py::arg("grace_s") = 0.0, ReleaseGil());
  bind_engine_queries(client,
                      [](EngineClient& c) -> const LLMEngine& { return c.engine(); });
}

}  // namespace vellum::python

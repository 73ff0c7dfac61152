// RequestOutput and its parts (vellum/outputs.h), read-only: the Python package turns them into
// vLLM's RequestOutput / CompletionOutput / Logprob (python/vellum/outputs.py).
#include <pybind11/stl.h>

#include "bindings.h"
#include "vellum/outputs.h"

namespace py = pybind11;

namespace vellum::python {

void bind_outputs(py::module_& m) {
  py::class_<TokenLogprobs>(m, "TokenLogprobs")
      .def_readonly("token_id", &TokenLogprobs::token_id)
      .def_readonly("logprob", &TokenLogprobs::logprob)
      .def_readonly("rank", &TokenLogprobs::rank)
      .def_readonly("top", &TokenLogprobs::top);
  py::class_<CompletionOutput>(m, "CompletionOutput")
      .def_readonly("index", &CompletionOutput::index)
      .def_property_readonly("text", [](const CompletionOutput& c) { return utf8(c.text); })
      .def_readonly("token_ids", &CompletionOutput::token_ids)
      .def_readonly("cumulative_logprob", &CompletionOutput::cumulative_logprob)
      .def_readonly("logprobs", &CompletionOutput::logprobs)
      .def_readonly("finish_reason", &CompletionOutput::finish_reason)
      .def_property_readonly("stop_reason_text",
                             [](const CompletionOutput& c) { return utf8(c.stop_reason_text); })
      .def_readonly("stop_reason_token", &CompletionOutput::stop_reason_token);
  py::class_<RequestMetrics>(m, "RequestMetrics")
      .def_readonly("arrival_time", &RequestMetrics::arrival_time)
      .def_readonly("first_scheduled_time", &RequestMetrics::first_scheduled_time)
      .def_readonly("first_token_time", &RequestMetrics::first_token_time)
      .def_readonly("last_token_time", &RequestMetrics::last_token_time)
      .def_readonly("finished_time", &RequestMetrics::finished_time)
      .def_readonly("inter_token_latencies", &RequestMetrics::inter_token_latencies)
      .def_readonly("num_generation_tokens", &RequestMetrics::num_generation_tokens);
  py::class_<RequestOutput>(m, "RequestOutput")
      .def_readonly("request_id", &RequestOutput::request_id)
      .def_property_readonly("prompt", [](const RequestOutput& r) { return utf8(r.prompt); })
      .def_readonly("prompt_token_ids", &RequestOutput::prompt_token_ids)
      .def_readonly("prompt_logprobs", &RequestOutput::prompt_logprobs)
      .def_readonly("outputs", &RequestOutput::outputs)
      .def_readonly("finished", &RequestOutput::finished)
      .def_readonly("num_cached_tokens", &RequestOutput::num_cached_tokens)
      .def_readonly("metrics", &RequestOutput::metrics);
}

}  // namespace vellum::python

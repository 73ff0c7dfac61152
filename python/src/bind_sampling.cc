// SamplingParams (vellum/sampling_params.h): the C++ value the Python SamplingParams fills, and
// its validation with vLLM's messages (Python raises them as ValueError).
#include <pybind11/stl.h>

#include "bindings.h"
#include "vellum/sampling_params.h"

namespace py = pybind11;

namespace vellum::python {

void bind_sampling(py::module_& m) {
  py::enum_<RequestOutputKind>(m, "RequestOutputKind")
      .value("CUMULATIVE", RequestOutputKind::kCumulative)
      .value("DELTA", RequestOutputKind::kDelta)
      .value("FINAL_ONLY", RequestOutputKind::kFinalOnly);

  py::class_<RepetitionDetectionParams>(m, "RepetitionDetectionParams")
      .def(py::init<>())
      .def_readwrite("max_pattern_size", &RepetitionDetectionParams::max_pattern_size)
      .def_readwrite("min_pattern_size", &RepetitionDetectionParams::min_pattern_size)
      .def_readwrite("min_count", &RepetitionDetectionParams::min_count);

  using S = StructuredOutputsParams;
  py::class_<S>(m, "StructuredOutputsParams")
      .def(py::init<>())
      .def_readwrite("json", &S::json)
      .def_readwrite("regex", &S::regex)
      .def_readwrite("choice", &S::choice)
      .def_readwrite("grammar", &S::grammar)
      .def_readwrite("json_object", &S::json_object)
      .def_readwrite("disable_any_whitespace", &S::disable_any_whitespace);

  using P = SamplingParams;
  py::class_<P>(m, "SamplingParams")
      .def(py::init<>())
      .def_readwrite("n", &P::n)
      .def_readwrite("presence_penalty", &P::presence_penalty)
      .def_readwrite("frequency_penalty", &P::frequency_penalty)
      .def_readwrite("repetition_penalty", &P::repetition_penalty)
      .def_readwrite("temperature", &P::temperature)
      .def_readwrite("top_p", &P::top_p)
      .def_readwrite("top_k", &P::top_k)
      .def_readwrite("min_p", &P::min_p)
      .def_readwrite("seed", &P::seed)
      .def_readwrite("stop", &P::stop)
      .def_readwrite("stop_token_ids", &P::stop_token_ids)
      .def_readwrite("ignore_eos", &P::ignore_eos)
      .def_readwrite("max_tokens", &P::max_tokens)
      .def_readwrite("min_tokens", &P::min_tokens)
      .def_readwrite("logprobs", &P::logprobs)
      .def_readwrite("prompt_logprobs", &P::prompt_logprobs)
      .def_readwrite("logprob_token_ids", &P::logprob_token_ids)
      .def_readwrite("detokenize", &P::detokenize)
      .def_readwrite("skip_special_tokens", &P::skip_special_tokens)
      .def_readwrite("spaces_between_special_tokens", &P::spaces_between_special_tokens)
      .def_readwrite("include_stop_str_in_output", &P::include_stop_str_in_output)
      .def_readwrite("output_kind", &P::output_kind)
      .def_readwrite("logit_bias", &P::logit_bias)
      .def_readwrite("allowed_token_ids", &P::allowed_token_ids)
      .def_readwrite("bad_words", &P::bad_words)
      .def_readwrite("repetition_detection", &P::repetition_detection)
      .def_readwrite("truncate_prompt_tokens", &P::truncate_prompt_tokens)
      .def_readwrite("use_beam_search", &P::use_beam_search)
      .def_readwrite("length_penalty", &P::length_penalty)
      .def_readwrite("structured_outputs", &P::structured_outputs)
      .def("is_greedy", &P::is_greedy)
      .def("output_text_buffer_length", &P::output_text_buffer_length)
      // (param, message) of the first rule broken, None when valid.
      .def("validate",
           [](const P& p) -> std::optional<std::pair<std::string, std::string>> {
             if (auto e = p.validate()) return std::make_pair(e->param, e->message);
             return std::nullopt;
           })
      .def("normalize", &P::normalize);
}

}  // namespace vellum::python

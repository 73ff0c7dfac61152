// The pieces of the vellum._C module, one per public header they bind (include/vellum/).
//
// Threading: every call that may run long (model load, engine step, tokenization, waiting for
// outputs) releases the GIL; the engine thread of an EngineClient never takes it (its streams
// notify Python through an eventfd, see EventNotifier in bind_engine.cc).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

namespace vellum::python {

// Text from the engine as str. Invalid UTF-8 (a token that is a lone byte of a multi-byte
// character) becomes U+FFFD, as Hugging Face's decode does, instead of raising.
inline pybind11::str utf8(const std::string& text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (s == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(s);
}
inline pybind11::object utf8(const std::optional<std::string>& text) {
  if (!text) return pybind11::none();
  return utf8(*text);
}

void bind_errors(pybind11::module_& m);    // vellum::Error -> ValueError / OSError / ...
void bind_config(pybind11::module_& m);    // vellum/config.h
void bind_sampling(pybind11::module_& m);  // vellum/sampling_params.h
void bind_outputs(pybind11::module_& m);   // vellum/outputs.h
void bind_engine(pybind11::module_& m);    // vellum/engine.h, vellum/engine_client.h

}  // namespace vellum::python

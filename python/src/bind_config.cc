// EngineConfig and its parts (vellum/config.h), plain read-write structs.
#include <pybind11/stl.h>

#include "bindings.h"
#include "vellum/config.h"
#include "vellum/status.h"

namespace py = pybind11;

namespace vellum::python {

void bind_errors(py::module_& /*m*/) {
  // The message crosses unchanged; the type follows what the code means to a Python caller.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.code()) {
        case ErrorCode::kInvalidArgument:
        case ErrorCode::kInvalidModel:
        case ErrorCode::kOutOfMemory:  // a configured budget too small: a configuration error
          type = PyExc_ValueError;
          break;
        case ErrorCode::kIo:
          type = PyExc_OSError;
          break;
        case ErrorCode::kNotFound:
          type = PyExc_LookupError;
          break;
        case ErrorCode::kUnsupported:
          type = PyExc_NotImplementedError;
          break;
        case ErrorCode::kInternal:
          type = PyExc_RuntimeError;
          break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

void bind_config(py::module_& m) {
  py::class_<ModelConfig>(m, "ModelConfig")
      .def(py::init<>())
      .def_readwrite("model", &ModelConfig::model)
      .def_readwrite("gguf_file", &ModelConfig::gguf_file)
      .def_readwrite("dtype", &ModelConfig::dtype)
      .def_readwrite("max_model_len", &ModelConfig::max_model_len)
      .def_readwrite("chat_template", &ModelConfig::chat_template)
      .def_readwrite("served_model_name", &ModelConfig::served_model_name)
      .def_readwrite("load_format", &ModelConfig::load_format)
      .def_readwrite("tokenizer", &ModelConfig::tokenizer)
      .def_readwrite("skip_tokenizer_init", &ModelConfig::skip_tokenizer_init)
      .def_readwrite("generation_config", &ModelConfig::generation_config)
      .def_readwrite("batch_invariant", &ModelConfig::batch_invariant)
      .def_readwrite("max_logprobs", &ModelConfig::max_logprobs);
  py::class_<CacheConfig>(m, "CacheConfig")
      .def(py::init<>())
      .def_readwrite("block_size", &CacheConfig::block_size)
      .def_readwrite("cache_dtype", &CacheConfig::cache_dtype)
      .def_readwrite("cache_type_k", &CacheConfig::cache_type_k)
      .def_readwrite("cache_type_v", &CacheConfig::cache_type_v)
      .def_readwrite("kv_cache_rotate_k", &CacheConfig::kv_cache_rotate_k)
      .def_readwrite("kv_cache_memory_bytes", &CacheConfig::kv_cache_memory_bytes)
      .def_readwrite("kv_cache_fraction", &CacheConfig::kv_cache_fraction)
      .def_readwrite("enable_prefix_caching", &CacheConfig::enable_prefix_caching)
      .def_readwrite("disable_hybrid_kv_cache_manager",
                     &CacheConfig::disable_hybrid_kv_cache_manager)
      .def_readwrite("swap_space_bytes", &CacheConfig::swap_space_bytes)
      .def_readwrite("num_blocks_override", &CacheConfig::num_blocks_override);
  py::class_<SchedulerConfig>(m, "SchedulerConfig")
      .def(py::init<>())
      .def_readwrite("max_num_batched_tokens", &SchedulerConfig::max_num_batched_tokens)
      .def_readwrite("max_num_seqs", &SchedulerConfig::max_num_seqs)
      .def_readwrite("enable_chunked_prefill", &SchedulerConfig::enable_chunked_prefill)
      .def_readwrite("long_prefill_token_threshold",
                     &SchedulerConfig::long_prefill_token_threshold)
      .def_readwrite("policy", &SchedulerConfig::policy)
      .def_readwrite("preemption_mode", &SchedulerConfig::preemption_mode);
  py::class_<ParallelConfig>(m, "ParallelConfig")
      .def(py::init<>())
      .def_readwrite("num_threads", &ParallelConfig::num_threads);
  py::class_<EngineConfig>(m, "EngineConfig")
      .def(py::init<>())
      .def_readwrite("model", &EngineConfig::model)
      .def_readwrite("cache", &EngineConfig::cache)
      .def_readwrite("scheduler", &EngineConfig::scheduler)
      .def_readwrite("parallel", &EngineConfig::parallel)
      .def_readwrite("speculative_config", &EngineConfig::speculative_config);
}

}  // namespace vellum::python

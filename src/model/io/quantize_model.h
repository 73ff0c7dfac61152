// `vellum quantize`: rewrites a GGUF file with its tensors in another type, as llama-quantize
// does (the per-tensor choices are quantize_plan.h's).
//
// Conversion: each converted tensor is dequantized row by row with GGML's dequantize_row_*
// semantics (kernels::ref::dequantize_row) and, unless the target is F32, encoded with
// quantize_row (quantize.h). So a quantized file converted to F32 holds exactly the values
// llama.cpp dequantizes it to. Re-quantizing (a quantized source into another type) compounds
// the error and is refused unless allow_requantize is set.
//
// Output: every metadata key of the input in its order, general.quantization_version = 2 and
// general.file_type = the target's llama_ftype; the tensors in the input's order. The file is
// streamed (memory bounded by a chunk of rows, not the model) through OUT.tmp and renamed, so a
// failure leaves no OUT file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "model/io/quantize_plan.h"

namespace vellum::model {

// One tensor as it is written (the progress line of llama-quantize).
struct QuantizeTensorReport {
  int tensor_idx = 0;  // 0-based
  int num_tensors = 0;
  std::string name;
  std::vector<int64_t> shape;  // GGML order
  gguf::GgmlType old_type = gguf::GgmlType::F32;
  gguf::GgmlType new_type = gguf::GgmlType::F32;
  bool converted = false;
  size_t old_bytes = 0;
  size_t new_bytes = 0;
};

// llama-quantize's line for `report`:
// "[  12/ 272]               blk.1.attn_k.weight - [  576,   192,     1,     1], type =   Q4_1, converting to F32 .. size =     0.06 MiB ->     0.42 MiB"
std::string format_tensor_report(const QuantizeTensorReport& report);

struct QuantizeOptions {
  std::filesystem::path input;
  std::filesystem::path output;  // must not be the input
  std::string type;              // a target of find_quantize_target: "Q4_K_M", "f32", "15"
  bool allow_requantize = false;
  QuantizePlanOptions plan;
  int num_threads = 0;  // 0: OpenMP's default
  // Called once per tensor, in file order, as it is written (from the calling thread).
  std::function<void(const QuantizeTensorReport&)> on_tensor;
};

struct QuantizeSummary {
  const QuantizeTarget* target = nullptr;
  int num_tensors = 0;
  int num_converted = 0;
  size_t input_bytes = 0;   // sum of the tensors' bytes, as llama-quantize's "model size"
  size_t output_bytes = 0;  // its "quant size"
  double seconds = 0.0;
};

// Throws vellum::Error: kIo (missing input, unwritable output), kInvalidModel (corrupt GGUF),
// kInvalidArgument (unknown type, output == input, a refused re-quantization), kUnsupported (a
// target or source tensor type Vellum cannot handle).
QuantizeSummary quantize_model(const QuantizeOptions& options);

}  // namespace vellum::model

#include "model/io/quantize_model.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <system_error>

#include "common/check.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"
#include "model/io/quantize.h"
#include "model/io/weight_type.h"

namespace vellum::model {
namespace {

using gguf::GgmlType;

// GGML's quantization format version (GGML_QNT_VERSION), which llama-quantize writes.
constexpr uint32_t kQuantizationVersion = 2;
// Rows are converted a chunk at a time: about this many f32 values (64 MiB) per chunk.
constexpr int64_t kChunkElements = int64_t{16} << 20;

bool is_block_quantized(GgmlType type) { return gguf::ggml_block_size(type) > 1; }

// Writes `tensor` (num_rows rows of row_size elements of `from`) as `to` into `sink`, a chunk of
// rows at a time: dequantize each row to f32, then encode it (F32: the f32 row is the output).
void convert_tensor(const gguf::TensorInfo& tensor, kernels::WeightType from, GgmlType to,
                    int num_threads, gguf::TensorSink& sink) {
  const int64_t row_size = tensor.shape[0];
  const int64_t num_rows = tensor.num_elements() / row_size;
  const size_t in_row_bytes = tensor.nbytes / static_cast<size_t>(num_rows);
  const size_t out_row_bytes = gguf::tensor_nbytes(to, {row_size});
  const int64_t rows_per_chunk = std::clamp<int64_t>(kChunkElements / row_size, 1, num_rows);
  std::vector<uint8_t> out(static_cast<size_t>(rows_per_chunk) * out_row_bytes);  // (chunk rows, out row)
  for (int64_t first = 0; first < num_rows; first += rows_per_chunk) {
    const int64_t chunk_rows = std::min(rows_per_chunk, num_rows - first);
#pragma omp parallel num_threads(num_threads)
    {
      std::vector<float> row(to == GgmlType::F32 ? 0 : static_cast<size_t>(row_size));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < chunk_rows; ++r) {
        const uint8_t* src = tensor.data + static_cast<size_t>(first + r) * in_row_bytes;
        uint8_t* dst = out.data() + static_cast<size_t>(r) * out_row_bytes;
        if (to == GgmlType::F32) {
          kernels::ref::dequantize_row(reinterpret_cast<float*>(dst), src, from, row_size);
        } else {
          kernels::ref::dequantize_row(row.data(), src, from, row_size);
          quantize_row(to, row.data(), row_size, dst);
        }
      }
    }
    sink.write(out.data(), static_cast<size_t>(chunk_rows) * out_row_bytes);
  }
}

void check_paths(const QuantizeOptions& options) {
  VELLUM_CHECK(!options.output.empty(), ErrorCode::kInvalidArgument, "no output path given");
  // The same file under another name (a link), or the same path spelled differently.
  std::error_code ec;
  bool same = std::filesystem::exists(options.output, ec) &&
              std::filesystem::equivalent(options.input, options.output, ec);
  std::error_code in_ec;
  std::error_code out_ec;
  const auto in = std::filesystem::weakly_canonical(options.input, in_ec);
  const auto out = std::filesystem::weakly_canonical(options.output, out_ec);
  same = same || (!in_ec && !out_ec && in == out);
  VELLUM_CHECK(!same, ErrorCode::kInvalidArgument,
               "the output '{}' is the input file; write the quantized model to another path",
               options.output.string());
}

}  // namespace

std::string format_tensor_report(const QuantizeTensorReport& r) {
  std::string shape = fmt::format("{:5}", r.shape.empty() ? 1 : r.shape[0]);
  for (size_t d = 1; d < gguf::kMaxDims; ++d) {
    shape += fmt::format(", {:5}", d < r.shape.size() ? r.shape[d] : 1);
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  std::string line = fmt::format("[{:4}/{:4}] {:>36} - [{}], type = {:>6}, ", r.tensor_idx + 1,
                                 r.num_tensors, r.name, shape, gguf::ggml_type_name(r.old_type));
  if (r.converted) {
    line += fmt::format("converting to {} .. size = {:8.2f} MiB -> {:8.2f} MiB",
                        gguf::ggml_type_name(r.new_type), r.old_bytes / kMiB, r.new_bytes / kMiB);
  } else {
    line += fmt::format("size = {:8.3f} MiB", r.old_bytes / kMiB);
  }
  return line;
}

QuantizeSummary quantize_model(const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const QuantizeTarget& target = find_quantize_target(options.type);
  check_paths(options);
  const std::unique_ptr<gguf::GgufFile> file = gguf::GgufFile::open(options.input);
  const std::optional<int64_t> num_splits = file->get_int("split.count");
  VELLUM_CHECK(!num_splits || *num_splits <= 1, ErrorCode::kUnsupported,
               "{} is one part of a split model ({} parts); merge it first (llama-gguf-split "
               "--merge)",
               options.input.string(), *num_splits);

  const std::vector<TensorPlan> plan = plan_quantization(*file, target, options.plan);
  const auto& tensors = file->tensors();
  // Everything that could fail is checked here, before the output is created.
  for (const TensorPlan& p : plan) {
    if (!p.convert) continue;
    const gguf::TensorInfo& t = tensors[p.tensor_idx];
    VELLUM_CHECK(options.allow_requantize || !is_block_quantized(t.type),
                 ErrorCode::kInvalidArgument,
                 "requantizing from type {} is disabled (tensor '{}' of {} is already "
                 "quantized): pass --allow-requantize to convert it to {} anyway (to F32, F16 "
                 "or BF16 that dequantizes it; to another quantized type the errors compound)",
                 gguf::ggml_type_name(t.type), t.name, options.input.string(),
                 gguf::ggml_type_name(p.new_type));
    VELLUM_CHECK(kernel_weight_type(t.type).has_value(), ErrorCode::kUnsupported,
                 "tensor '{}' has type {}, which Vellum cannot dequantize; supported source "
                 "types: {}",
                 t.name, gguf::ggml_type_name(t.type), kernels::supported_weight_types_list());
    VELLUM_CHECK(is_quantizable(p.new_type), ErrorCode::kUnsupported,
                 "tensor '{}': Vellum cannot encode type {}", t.name,
                 gguf::ggml_type_name(p.new_type));
    VELLUM_CHECK(t.shape[0] % gguf::ggml_block_size(t.type) == 0 &&
                     t.shape[0] % gguf::ggml_block_size(p.new_type) == 0,
                 ErrorCode::kInvalidArgument, "tensor '{}': rows of {} elements do not fit type {}",
                 t.name, t.shape[0], gguf::ggml_type_name(p.new_type));
  }

  gguf::GgufWriter writer;
  for (const auto& [key, value] : file->metadata()) writer.set(key, value);
  writer.set_u32("general.quantization_version", kQuantizationVersion);
  writer.set_u32("general.file_type", target.file_type);

  QuantizeSummary summary;
  summary.target = &target;
  summary.num_tensors = static_cast<int>(plan.size());
  const int num_threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  for (const TensorPlan& p : plan) {
    const gguf::TensorInfo& t = tensors[p.tensor_idx];
    QuantizeTensorReport report{static_cast<int>(p.tensor_idx), summary.num_tensors, t.name,
                                t.shape, t.type, p.new_type, p.convert, t.nbytes,
                                gguf::tensor_nbytes(p.new_type, t.shape)};
    summary.input_bytes += report.old_bytes;
    summary.output_bytes += report.new_bytes;
    summary.num_converted += p.convert ? 1 : 0;
    writer.add_tensor_stream(
        t.name, p.new_type, t.shape,
        [&t, &options, p, done = std::move(report), num_threads](gguf::TensorSink& sink) {
          if (p.convert) {
            convert_tensor(t, *kernel_weight_type(t.type), p.new_type, num_threads, sink);
          } else {
            sink.write(t.data, t.nbytes);
          }
          if (options.on_tensor) options.on_tensor(done);
        });
  }
  writer.write(options.output);
  summary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace vellum::model

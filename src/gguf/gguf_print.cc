#include "gguf/gguf_print.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

namespace vellum::gguf {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string type_string(const Value& v) {
  if (const Array* a = v.as_array()) {
    return fmt::format("array[{}]", value_type_name(a->element_type()));
  }
  return value_type_name(v.type());
}

}  // namespace

std::vector<TensorTypeTotal> tensor_type_totals(const GgufFile& file) {
  std::map<uint32_t, TensorTypeTotal> by_id;
  for (const TensorInfo& t : file.tensors()) {
    TensorTypeTotal& total =
        by_id.try_emplace(static_cast<uint32_t>(t.type), TensorTypeTotal{t.type, 0, 0})
            .first->second;
    ++total.num_tensors;
    total.bytes += t.nbytes;
  }
  std::vector<TensorTypeTotal> totals;
  for (const auto& [id, total] : by_id) totals.push_back(total);
  std::stable_sort(totals.begin(), totals.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return totals;
}

void print_summary(const GgufFile& file, std::FILE* out) {
  fmt::print(out, "{}: GGUF v{}, {} bytes, alignment {}, data at offset {}\n",
             file.path().string(), file.version(), file.file_size(), file.alignment(),
             file.data_offset());
  fmt::print(out, "\n{} metadata keys:\n", file.metadata().size());
  for (size_t i = 0; i < file.metadata().size(); ++i) {
    const auto& [key, value] = file.metadata()[i];
    fmt::print(out, "{:5}: {:<14} {} = {}\n", i, type_string(value), key, value.to_string(5));
  }
  size_t total_bytes = 0;
  for (const TensorInfo& t : file.tensors()) total_bytes += t.nbytes;
  fmt::print(out, "\ntensor types:\n{:<8} {:>8} {:>14} {:>7}\n", "type", "tensors", "bytes",
             "share");
  for (const TensorTypeTotal& t : tensor_type_totals(file)) {
    const double share = total_bytes > 0 ? 100.0 * static_cast<double>(t.bytes) /
                                               static_cast<double>(total_bytes)
                                         : 0.0;
    fmt::print(out, "{:<8} {:>8} {:>14} {:>6.1f}%\n", ggml_type_name(t.type), t.num_tensors,
               t.bytes, share);
  }
  fmt::print(out, "\n{} tensors:\n", file.tensors().size());
  fmt::print(out, "{:>5}  {:<32} {:<8} {:<24} {:>12} {:>12}\n", "index", "name", "type", "shape",
             "offset", "bytes");
  size_t total = 0;
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const TensorInfo& t = file.tensors()[i];
    fmt::print(out, "{:5}  {:<32} {:<8} {:<24} {:12} {:12}\n", i, t.name, ggml_type_name(t.type),
               shape_string(t.shape), t.offset, t.nbytes);
    total += t.nbytes;
  }
  fmt::print(out, "total tensor bytes: {}\n", total);
}

}  // namespace vellum::gguf

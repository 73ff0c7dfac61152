// Safetensors reader: memory-maps one .safetensors file read-only and validates its header.
//
// Layout (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON {"__metadata__": {str: str}, "name": {"dtype", "shape", "data_offsets": [b, e]}},
// then the data section. Offsets are relative to the data section. Every check the reference
// implementation makes is made here: the header fits the file and is a JSON object, every dtype
// is known, every tensor's byte size is its element count times its dtype size, and the tensors
// tile the data section exactly (no gap, no overlap, nothing after the last one). A file that
// fails any of them is refused with an error naming the file and the tensor.
//
// Tensor data is not copied: SafetensorsTensor::data points into the mapping, which lives as
// long as the SafetensorsFile. Thread-safety: immutable after open().
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vellum::model {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;            // as written: "F32", "F16", "BF16", "I8", "F8_E4M3", ...
  std::vector<int64_t> shape;   // outermost first (row-major), as written
  const uint8_t* data = nullptr;  // into the mapping
  size_t nbytes = 0;

  int64_t num_elements() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws vellum::Error (kIo when it cannot be opened or mapped,
  // kInvalidModel for anything wrong with its contents) naming the file.
  static std::shared_ptr<const SafetensorsFile> open(const std::filesystem::path& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  size_t file_size() const { return file_size_; }
  // __metadata__ (string values only, as the format requires).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In data-offset order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  void parse();

  std::filesystem::path path_;
  const uint8_t* map_ = nullptr;
  size_t file_size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string_view, size_t> index_;  // keys view tensors_ names
};

// Bytes per element of a safetensors dtype name, or 0 when the name is not a safetensors dtype.
size_t safetensors_dtype_size(std::string_view dtype);

}  // namespace vellum::model

// GGUF reader: memory-maps a .gguf file read-only and parses its metadata and tensor table.
//
// Supports GGUF versions 2 and 3 (little-endian). Every read is bounds-checked: a corrupt or
// truncated file makes open() throw vellum::Error (kIo when the file cannot be opened or mapped,
// kInvalidModel for anything wrong with its contents), never crash or read out of bounds.
//
// Tensor data is not copied: TensorInfo::data points into the mapping, which lives as long as
// the GgufFile. Metadata (including large arrays such as the tokenizer vocabulary) is parsed
// once at open() into owned Values.
//
// Thread-safety: a GgufFile is immutable after open(); const methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"
#include "vellum/status.h"  // vellum::Error, thrown by open() and the getters

namespace vellum::gguf {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  // GGML order: shape[0] is the contiguous (innermost) dimension. A matrix with `rows` rows of
  // `cols` elements has shape {cols, rows}.
  std::vector<int64_t> shape;
  uint64_t offset = 0;            // relative to the start of the data section
  const uint8_t* data = nullptr;  // into the file mapping; owned by the GgufFile
  size_t nbytes = 0;

  int64_t num_elements() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws vellum::Error naming the file and the problem.
  static std::unique_ptr<GgufFile> open(const std::filesystem::path& path);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  const std::filesystem::path& path() const { return path_; }
  size_t file_size() const { return file_size_; }
  uint32_t alignment() const { return alignment_; }
  // Absolute file offset of the tensor data section.
  uint64_t data_offset() const { return data_offset_; }

  // All key/value pairs in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;

  // Typed getters: nullopt / empty when the key is absent; throw vellum::Error (kInvalidModel)
  // when it is present with an incompatible type. Integer getters accept any integer width;
  // get_float accepts integers too.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;  // copies
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int32_t> get_int_array(std::string_view key) const;
  // No copy: the parsed string array itself (e.g. tokenizer.ggml.tokens), or nullptr when
  // absent. Throws when present but not an array of strings.
  const std::vector<std::string>* find_string_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  void parse();
  const Array& require_array(std::string_view key, const Value& value) const;

  std::filesystem::path path_;
  const uint8_t* map_ = nullptr;  // read-only mapping of the whole file
  size_t file_size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::unordered_map<std::string_view, size_t> metadata_index_;  // keys view metadata_
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // keys view tensors_ names
};

}  // namespace vellum::gguf

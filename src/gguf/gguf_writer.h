// GGUF writer: collects metadata and tensor descriptions, then streams a version-3 file.
//
// Tensor bytes can be given three ways: an owned copy, a non-owning view (for copying tensors
// out of a mapped GgufFile), or a fill callback that streams the bytes into a sink when the file
// is written. With callbacks, write() holds no tensor data of its own, so a multi-GB model can
// be produced with memory bounded by what the callback chooses to buffer.
//
// File layout: header, metadata in insertion order, tensor infos in insertion order, padding to
// the alignment (general.alignment if set, else 32), then each tensor's bytes followed by zero
// padding to the alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"
#include "vellum/status.h"  // vellum::Error, thrown on bad input and write errors

namespace vellum::gguf {

// Receives one tensor's bytes, in order, from a TensorFillFn.
class TensorSink {
 public:
  virtual ~TensorSink() = default;
  virtual void write(const void* data, size_t num_bytes) = 0;
};

// Must write exactly the tensor's byte size (checked) to the sink, in one or more calls.
using TensorFillFn = std::function<void(TensorSink&)>;

class GgufWriter {
 public:
  // Sets a key; an existing key keeps its position and gets the new value.
  void set(std::string_view key, Value value);
  void set_string(std::string_view key, std::string value) { set(key, Value(std::move(value))); }
  void set_u32(std::string_view key, uint32_t value) { set(key, Value(value)); }
  void set_i32(std::string_view key, int32_t value) { set(key, Value(value)); }
  void set_u64(std::string_view key, uint64_t value) { set(key, Value(value)); }
  void set_f32(std::string_view key, float value) { set(key, Value(value)); }
  void set_bool(std::string_view key, bool value) { set(key, Value(value)); }
  void set_string_array(std::string_view key, std::vector<std::string> values);
  void set_f32_array(std::string_view key, std::vector<float> values);
  void set_i32_array(std::string_view key, std::vector<int32_t> values);
  bool remove(std::string_view key);
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }

  // `shape` is in GGML order (shape[0] innermost). Throws kInvalidArgument on a duplicate name,
  // an unknown type, more than 4 dims, a row not a multiple of the type's block size, or bytes
  // whose size differs from the shape's.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                  std::vector<uint8_t> bytes);
  // `bytes` must stay valid until write() returns.
  void add_tensor_view(std::string name, GgmlType type, std::vector<int64_t> shape,
                       std::span<const uint8_t> bytes);
  void add_tensor_stream(std::string name, GgmlType type, std::vector<int64_t> shape,
                         TensorFillFn fill);

  size_t num_tensors() const { return tensors_.size(); }

  // Writes the file to `path` (via `path` + ".tmp" and a rename, so a failed write leaves no
  // partial file under the final name). Throws kIo on write errors. Callable more than once.
  void write(const std::filesystem::path& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    size_t nbytes;
    std::vector<uint8_t> owned;
    std::span<const uint8_t> view;
    TensorFillFn fill;
  };
  PendingTensor& add_tensor_info(std::string name, GgmlType type, std::vector<int64_t> shape);
  uint32_t alignment() const;

  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

// Bytes of a tensor of `type` with `shape` (GGML order); throws kInvalidArgument when the row is
// not a multiple of the block size or the type is unknown.
size_t tensor_nbytes(GgmlType type, const std::vector<int64_t>& shape);

}  // namespace vellum::gguf

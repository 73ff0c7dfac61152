#include "gguf/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/check.h"
#include "gguf/gguf.h"

namespace vellum::gguf {

size_t tensor_nbytes(GgmlType type, const std::vector<int64_t>& shape) {
  VELLUM_CHECK(is_known_type(static_cast<uint32_t>(type)), ErrorCode::kInvalidArgument,
               "unknown GGML type id {}", static_cast<uint32_t>(type));
  int64_t num_elements = 1;
  for (int64_t d : shape) {
    VELLUM_CHECK(d >= 0, ErrorCode::kInvalidArgument, "negative tensor dimension {}", d);
    num_elements *= d;
  }
  const int64_t block = ggml_block_size(type);
  const int64_t row = shape.empty() ? 1 : shape[0];
  VELLUM_CHECK(row % block == 0, ErrorCode::kInvalidArgument,
               "a {} tensor needs rows that are a multiple of {} elements, got {}",
               ggml_type_name(type), block, row);
  return static_cast<size_t>(num_elements / block) * ggml_type_size(type);
}

void GgufWriter::set(std::string_view key, Value value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::string(key), std::move(value));
}

void GgufWriter::set_string_array(std::string_view key, std::vector<std::string> values) {
  set(key, Value(Array(std::move(values))));
}
void GgufWriter::set_f32_array(std::string_view key, std::vector<float> values) {
  set(key, Value(Array(std::move(values))));
}
void GgufWriter::set_i32_array(std::string_view key, std::vector<int32_t> values) {
  set(key, Value(Array(std::move(values))));
}

bool GgufWriter::remove(std::string_view key) {
  for (auto it = metadata_.begin(); it != metadata_.end(); ++it) {
    if (it->first == key) {
      metadata_.erase(it);
      return true;
    }
  }
  return false;
}

const Value* GgufWriter::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

GgufWriter::PendingTensor& GgufWriter::add_tensor_info(std::string name, GgmlType type,
                                                       std::vector<int64_t> shape) {
  VELLUM_CHECK(shape.size() <= kMaxDims, ErrorCode::kInvalidArgument,
               "tensor '{}' has {} dimensions; GGUF allows at most {}", name, shape.size(),
               kMaxDims);
  for (const PendingTensor& t : tensors_) {
    VELLUM_CHECK(t.name != name, ErrorCode::kInvalidArgument, "tensor '{}' was added twice", name);
  }
  PendingTensor t;
  t.nbytes = tensor_nbytes(type, shape);
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  PendingTensor& t = add_tensor_info(std::move(name), type, std::move(shape));
  if (bytes.size() != t.nbytes) {
    const std::string bad = t.name;
    const size_t expected = t.nbytes;
    tensors_.pop_back();
    VELLUM_THROW(ErrorCode::kInvalidArgument, "tensor '{}' needs {} bytes, got {}", bad, expected,
                 bytes.size());
  }
  t.owned = std::move(bytes);
  t.view = t.owned;
}

void GgufWriter::add_tensor_view(std::string name, GgmlType type, std::vector<int64_t> shape,
                                 std::span<const uint8_t> bytes) {
  PendingTensor& t = add_tensor_info(std::move(name), type, std::move(shape));
  if (bytes.size() != t.nbytes) {
    const std::string bad = t.name;
    const size_t expected = t.nbytes;
    tensors_.pop_back();
    VELLUM_THROW(ErrorCode::kInvalidArgument, "tensor '{}' needs {} bytes, got {}", bad, expected,
                 bytes.size());
  }
  t.view = bytes;
}

void GgufWriter::add_tensor_stream(std::string name, GgmlType type, std::vector<int64_t> shape,
                                   TensorFillFn fill) {
  VELLUM_CHECK(fill != nullptr, ErrorCode::kInvalidArgument, "tensor '{}' has no fill function",
               name);
  PendingTensor& t = add_tensor_info(std::move(name), type, std::move(shape));
  t.fill = std::move(fill);
}

uint32_t GgufWriter::alignment() const {
  const Value* v = find("general.alignment");
  if (v == nullptr) return kDefaultAlignment;
  const std::optional<int64_t> a = v->as_int();
  VELLUM_CHECK(a && *a > 0 && *a <= (1 << 30) && std::has_single_bit(static_cast<uint64_t>(*a)),
               ErrorCode::kInvalidArgument,
               "general.alignment must be a positive power of two, got {}", v->to_string());
  return static_cast<uint32_t>(*a);
}

namespace {

// Buffered output file; every failure throws kIo naming the file.
class OutFile final : public TensorSink {
 public:
  explicit OutFile(std::filesystem::path path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr) {
      const int err = errno;
      VELLUM_THROW(ErrorCode::kIo, "cannot create '{}': {}; check the directory exists and is "
                   "writable", path_.string(), std::strerror(err));
    }
    buffer_ = std::make_unique<char[]>(kBufferSize);
    std::setvbuf(file_, buffer_.get(), _IOFBF, kBufferSize);
  }
  ~OutFile() override {
    if (file_ != nullptr) std::fclose(file_);
  }

  void write(const void* data, size_t num_bytes) override {
    if (num_bytes == 0) return;
    if (std::fwrite(data, 1, num_bytes, file_) != num_bytes) {
      const int err = errno;
      VELLUM_THROW(ErrorCode::kIo, "error writing '{}': {} (disk full?)", path_.string(),
                   std::strerror(err));
    }
    pos_ += num_bytes;
  }
  template <typename T>
  void put(T v) {
    write(&v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    write(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static constexpr uint8_t kZeros[256] = {};
    while (pos_ % alignment != 0) {
      const uint64_t n = std::min<uint64_t>(alignment - pos_ % alignment, sizeof(kZeros));
      write(kZeros, n);
    }
  }
  uint64_t pos() const { return pos_; }
  void close() {
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) {
      const int err = errno;
      VELLUM_THROW(ErrorCode::kIo, "error writing '{}': {}", path_.string(), std::strerror(err));
    }
  }

 private:
  static constexpr size_t kBufferSize = size_t{4} << 20;
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  uint64_t pos_ = 0;
};

void write_array(OutFile& out, const Array& array);

void write_value(OutFile& out, const Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out.put_string(v);
        } else if constexpr (std::is_same_v<T, std::shared_ptr<const Array>>) {
          write_array(out, *v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out.put<uint8_t>(v ? 1 : 0);
        } else {
          out.put<T>(v);
        }
      },
      value.storage());
}

void write_array(OutFile& out, const Array& array) {
  out.put<uint32_t>(static_cast<uint32_t>(array.element_type()));
  out.put<uint64_t>(array.size());
  std::visit(
      [&](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          for (const std::string& s : v) out.put_string(s);
        } else if constexpr (std::is_same_v<T, Value>) {
          for (const Value& element : v) {
            const Array* inner = element.as_array();
            VELLUM_CHECK(inner != nullptr, ErrorCode::kInvalidArgument,
                         "an array of arrays holds a {} element", value_type_name(element.type()));
            write_array(out, *inner);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          for (bool b : v) out.put<uint8_t>(b ? 1 : 0);
        } else {
          out.write(v.data(), v.size() * sizeof(T));
        }
      },
      array.storage());
}

// Counts what a fill callback writes and forwards it.
class CountingSink final : public TensorSink {
 public:
  explicit CountingSink(OutFile& out) : out_(out) {}
  void write(const void* data, size_t num_bytes) override {
    out_.write(data, num_bytes);
    count_ += num_bytes;
  }
  size_t count() const { return count_; }

 private:
  OutFile& out_;
  size_t count_ = 0;
};

}  // namespace

void GgufWriter::write(const std::filesystem::path& path) const {
  const uint32_t align = alignment();
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  try {
    OutFile out(tmp);
    out.put<uint32_t>(kGgufMagic);
    out.put<uint32_t>(3);
    out.put<uint64_t>(tensors_.size());
    out.put<uint64_t>(metadata_.size());
    for (const auto& [key, value] : metadata_) {
      out.put_string(key);
      out.put<uint32_t>(static_cast<uint32_t>(value.type()));
      write_value(out, value);
    }
    uint64_t offset = 0;
    for (const PendingTensor& t : tensors_) {
      out.put_string(t.name);
      out.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
      for (int64_t d : t.shape) out.put<int64_t>(d);
      out.put<uint32_t>(static_cast<uint32_t>(t.type));
      out.put<uint64_t>(offset);
      offset += (t.nbytes + align - 1) / align * align;
    }
    out.pad_to(align);
    for (const PendingTensor& t : tensors_) {
      if (t.fill) {
        CountingSink sink(out);
        t.fill(sink);
        VELLUM_CHECK(sink.count() == t.nbytes, ErrorCode::kInvalidArgument,
                     "the fill function of tensor '{}' wrote {} bytes, expected {}", t.name,
                     sink.count(), t.nbytes);
      } else {
        out.write(t.view.data(), t.view.size());
      }
      out.pad_to(align);
    }
    out.close();
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    VELLUM_CHECK(!ec, ErrorCode::kIo, "cannot rename '{}' to '{}': {}", tmp.string(),
                 path.string(), ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
}

}  // namespace vellum::gguf

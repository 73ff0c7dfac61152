// GgufFile: mapping and parsing. See gguf.h for the contract.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "gguf/gguf.h"

namespace vellum::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr int kMaxArrayDepth = 16;  // nested arrays deeper than this are treated as corrupt

// Bounds-checked sequential reader over the mapping. `section_` names what is being read so that
// a truncation error says where the file was cut.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& file)
      : data_(data), size_(size), file_(file) {}

  void set_section(const char* section) { section_ = section; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(size_t n) const {
    if (n > remaining()) {
      VELLUM_THROW(ErrorCode::kInvalidModel,
                   "{}: truncated GGUF file: the {} needs {} bytes at offset {} but the file ends "
                   "at byte {}; the file is incomplete or corrupt (re-download or re-convert it)",
                   file_, section_, n, pos_, size_);
    }
  }

  template <typename T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // Reads `count` elements of T into `out`, checking the total size first.
  template <typename T>
  void read_into(std::vector<T>& out, uint64_t count) {
    check_count(count, sizeof(T), "array");
    out.resize(count);
    if (count > 0) std::memcpy(out.data(), data_ + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
  }

  std::string read_string() {
    const uint64_t len = read<uint64_t>();
    if (len > remaining()) {
      VELLUM_THROW(ErrorCode::kInvalidModel,
                   "{}: corrupt GGUF file: a string length of {} bytes at offset {} in the {} is "
                   "larger than the rest of the file ({} bytes); the file is truncated or corrupt",
                   file_, len, pos_ - 8, section_, remaining());
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  // Rejects a count whose elements (at least `min_bytes` each) cannot fit in the rest of the
  // file, before anything is allocated for them.
  void check_count(uint64_t count, size_t min_bytes, const char* what) const {
    if (count > remaining() / min_bytes) {
      VELLUM_THROW(ErrorCode::kInvalidModel,
                   "{}: corrupt GGUF file: the {} declares {} {} items of at least {} bytes each "
                   "but only {} bytes remain in the file (count is larger than the file); the "
                   "file is truncated or corrupt",
                   file_, section_, count, what, min_bytes, remaining());
    }
  }

  const std::string& file() const { return file_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
  const char* section_ = "header";
};

size_t min_encoded_size(ValueType type) {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
    case ValueType::kString:  // u64 length
      return 8;
    case ValueType::kArray:  // u32 type + u64 count
      return 12;
  }
  return 1;
}

ValueType read_value_type(Cursor& in, const std::string& key) {
  const uint32_t id = in.read<uint32_t>();
  if (id >= kNumValueTypes) {
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "{}: corrupt GGUF file: metadata key '{}' has unknown value type id {} (valid "
                 "ids are 0..{}) at offset {}",
                 in.file(), key, id, kNumValueTypes - 1, in.pos() - 4);
  }
  return static_cast<ValueType>(id);
}

Array read_array(Cursor& in, const std::string& key, int depth);

Value read_value(Cursor& in, ValueType type, const std::string& key, int depth) {
  switch (type) {
    case ValueType::kU8: return Value(in.read<uint8_t>());
    case ValueType::kI8: return Value(in.read<int8_t>());
    case ValueType::kU16: return Value(in.read<uint16_t>());
    case ValueType::kI16: return Value(in.read<int16_t>());
    case ValueType::kU32: return Value(in.read<uint32_t>());
    case ValueType::kI32: return Value(in.read<int32_t>());
    case ValueType::kF32: return Value(in.read<float>());
    case ValueType::kBool: return Value(in.read<uint8_t>() != 0);
    case ValueType::kString: return Value(in.read_string());
    case ValueType::kArray: return Value(read_array(in, key, depth + 1));
    case ValueType::kU64: return Value(in.read<uint64_t>());
    case ValueType::kI64: return Value(in.read<int64_t>());
    case ValueType::kF64: return Value(in.read<double>());
  }
  VELLUM_ASSERT(false);
}

Array read_array(Cursor& in, const std::string& key, int depth) {
  if (depth > kMaxArrayDepth) {
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "{}: corrupt GGUF file: metadata key '{}' nests arrays deeper than {} levels",
                 in.file(), key, kMaxArrayDepth);
  }
  const ValueType elem = read_value_type(in, key);
  const uint64_t count = in.read<uint64_t>();
  in.check_count(count, min_encoded_size(elem), "array");
  auto read_numeric = [&]<typename T>(std::in_place_type_t<T>) {
    std::vector<T> v;
    in.read_into(v, count);
    return Array(std::move(v));
  };
  switch (elem) {
    case ValueType::kU8: return read_numeric(std::in_place_type<uint8_t>);
    case ValueType::kI8: return read_numeric(std::in_place_type<int8_t>);
    case ValueType::kU16: return read_numeric(std::in_place_type<uint16_t>);
    case ValueType::kI16: return read_numeric(std::in_place_type<int16_t>);
    case ValueType::kU32: return read_numeric(std::in_place_type<uint32_t>);
    case ValueType::kI32: return read_numeric(std::in_place_type<int32_t>);
    case ValueType::kF32: return read_numeric(std::in_place_type<float>);
    case ValueType::kU64: return read_numeric(std::in_place_type<uint64_t>);
    case ValueType::kI64: return read_numeric(std::in_place_type<int64_t>);
    case ValueType::kF64: return read_numeric(std::in_place_type<double>);
    case ValueType::kBool: {
      std::vector<bool> v(count);
      for (uint64_t i = 0; i < count; ++i) v[i] = in.read<uint8_t>() != 0;
      return Array(std::move(v));
    }
    case ValueType::kString: {
      std::vector<std::string> v;
      v.reserve(count);
      for (uint64_t i = 0; i < count; ++i) v.push_back(in.read_string());
      return Array(std::move(v));
    }
    case ValueType::kArray: {
      std::vector<Value> v;
      v.reserve(count);
      for (uint64_t i = 0; i < count; ++i) v.emplace_back(read_array(in, key, depth + 1));
      return Array(std::move(v));
    }
  }
  VELLUM_ASSERT(false);
}

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

}  // namespace

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  const std::string name = path.string();

  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    VELLUM_THROW(ErrorCode::kIo, "cannot open model file '{}': {}; check the path and permissions",
                 name, std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    VELLUM_THROW(ErrorCode::kIo, "'{}' is not a regular file; pass the path of a .gguf file", name);
  }
  file->file_size_ = static_cast<size_t>(st.st_size);
  if (file->file_size_ == 0) {
    ::close(fd);
    VELLUM_THROW(ErrorCode::kInvalidModel, "{}: not a GGUF file (the file is empty)", name);
  }
  void* map = ::mmap(nullptr, file->file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) {
    VELLUM_THROW(ErrorCode::kIo, "cannot memory-map '{}' ({} bytes): {}", name, file->file_size_,
                 std::strerror(map_err));
  }
  file->map_ = static_cast<const uint8_t*>(map);
  file->parse();  // on throw, ~GgufFile unmaps
  return file;
}

GgufFile::~GgufFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), file_size_);
}

void GgufFile::parse() {
  const std::string file = path_.string();
  Cursor in(map_, file_size_, file);

  // Header.
  if (file_size_ < 4) {
    VELLUM_THROW(ErrorCode::kInvalidModel, "{}: not a GGUF file (only {} bytes long)", file,
                 file_size_);
  }
  const uint32_t magic = in.read<uint32_t>();
  if (magic != kGgufMagic) {
    std::string printable;
    for (int i = 0; i < 4; ++i) {
      const char c = static_cast<char>((magic >> (8 * i)) & 0xff);
      printable += (c >= 0x20 && c < 0x7f) ? c : '.';
    }
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "{}: not a GGUF file (magic 0x{:08x} '{}', expected 'GGUF'); pass a .gguf model "
                 "file (convert other formats with llama.cpp's convert_hf_to_gguf.py)",
                 file, magic, printable);
  }
  version_ = in.read<uint32_t>();
  if (version_ == 1) {
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "{}: GGUF version 1 is not supported (only versions 2 and 3); re-convert the "
                 "model with a current llama.cpp",
                 file);
  }
  if (version_ != 2 && version_ != 3) {
    const bool swapped = __builtin_bswap32(version_) == 2 || __builtin_bswap32(version_) == 3;
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "{}: unsupported GGUF version {}{} (supported: 2 and 3)", file, version_,
                 swapped ? " (this looks like a big-endian GGUF file, which is not supported)" : "");
  }
  const uint64_t num_tensors = in.read<uint64_t>();
  const uint64_t num_kv = in.read<uint64_t>();

  // Metadata.
  in.set_section("metadata");
  in.check_count(num_kv, 8 + 4 + 1, "metadata key/value");
  metadata_.reserve(num_kv);
  for (uint64_t i = 0; i < num_kv; ++i) {
    std::string key = in.read_string();
    const ValueType type = read_value_type(in, key);
    Value value = read_value(in, type, key, 0);
    metadata_.emplace_back(std::move(key), std::move(value));
  }
  for (size_t i = 0; i < metadata_.size(); ++i) {
    const auto [it, inserted] = metadata_index_.emplace(metadata_[i].first, i);
    VELLUM_CHECK(inserted, ErrorCode::kInvalidModel,
                 "{}: corrupt GGUF file: duplicate metadata key '{}'", file, metadata_[i].first);
  }

  if (const Value* a = find("general.alignment")) {
    const std::optional<int64_t> v = a->as_int();
    VELLUM_CHECK(v && *v > 0 && *v <= (1 << 30) && std::has_single_bit(static_cast<uint64_t>(*v)),
                 ErrorCode::kInvalidModel,
                 "{}: general.alignment must be a positive power of two, got {}", file,
                 a->to_string());
    alignment_ = static_cast<uint32_t>(*v);
  }

  // Tensor infos.
  in.set_section("tensor infos");
  in.check_count(num_tensors, 8 + 4 + 4 + 8, "tensor info");
  tensors_.reserve(num_tensors);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    TensorInfo t;
    t.name = in.read_string();
    const uint32_t num_dims = in.read<uint32_t>();
    VELLUM_CHECK(num_dims <= kMaxDims, ErrorCode::kInvalidModel,
                 "{}: corrupt GGUF file: tensor '{}' has {} dimensions (at most {} allowed)", file,
                 t.name, num_dims, kMaxDims);
    t.shape.resize(num_dims);
    int64_t num_elements = 1;
    for (uint32_t d = 0; d < num_dims; ++d) {
      const int64_t dim = in.read<int64_t>();
      VELLUM_CHECK(dim >= 0, ErrorCode::kInvalidModel,
                   "{}: corrupt GGUF file: tensor '{}' has negative dimension {}", file, t.name,
                   dim);
      VELLUM_CHECK(dim == 0 || num_elements <= std::numeric_limits<int64_t>::max() / dim,
                   ErrorCode::kInvalidModel,
                   "{}: corrupt GGUF file: tensor '{}' has an absurd number of elements", file,
                   t.name);
      num_elements *= dim;
      t.shape[d] = dim;
    }
    const uint32_t type_id = in.read<uint32_t>();
    if (!is_known_type(type_id)) {
      VELLUM_THROW(ErrorCode::kInvalidModel,
                   "{}: tensor '{}' has unknown GGML type id {} ({}); this file needs a newer "
                   "reader or is corrupt",
                   file, t.name, type_id, ggml_type_name(static_cast<GgmlType>(type_id)));
    }
    t.type = static_cast<GgmlType>(type_id);
    t.offset = in.read<uint64_t>();

    const int64_t block = ggml_block_size(t.type);
    const int64_t row = num_dims > 0 ? t.shape[0] : 1;
    VELLUM_CHECK(row % block == 0, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' of type {} has a row of {} elements, not a multiple of the "
                 "type's block size {}",
                 file, t.name, ggml_type_name(t.type), row, block);
    const uint64_t num_blocks = static_cast<uint64_t>(num_elements / block);
    const uint64_t type_size = ggml_type_size(t.type);
    VELLUM_CHECK(num_blocks <= file_size_ / type_size, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' ({} elements of {}) is out of bounds: it is larger than the "
                 "whole file ({} bytes); the file is truncated or corrupt",
                 file, t.name, num_elements, ggml_type_name(t.type), file_size_);
    t.nbytes = num_blocks * type_size;
    tensors_.push_back(std::move(t));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto [it, inserted] = tensor_index_.emplace(tensors_[i].name, i);
    VELLUM_CHECK(inserted, ErrorCode::kInvalidModel,
                 "{}: corrupt GGUF file: duplicate tensor name '{}' (tensors {} and {})", file,
                 tensors_[i].name, it->second, i);
  }

  // Tensor data.
  data_offset_ = align_up(in.pos(), alignment_);
  for (TensorInfo& t : tensors_) {
    VELLUM_CHECK(t.offset % alignment_ == 0, ErrorCode::kInvalidModel,
                 "{}: corrupt GGUF file: tensor '{}' has misaligned offset {} (must be a "
                 "multiple of the alignment {})",
                 file, t.name, t.offset, alignment_);
    const uint64_t begin = data_offset_ + t.offset;
    const bool in_bounds = t.offset <= file_size_ && begin <= file_size_ &&
                           t.nbytes <= file_size_ - begin;
    if (!in_bounds) {
      VELLUM_THROW(ErrorCode::kInvalidModel,
                   "{}: tensor '{}' ({} [{}]) is out of bounds: its {} bytes at data offset {} "
                   "(file offset {}) end past the end of the file ({} bytes); the file is "
                   "truncated (data cut short: download or convert it again) or the tensor "
                   "offset is corrupt",
                   file, t.name, ggml_type_name(t.type), fmt::join(t.shape, ", "), t.nbytes,
                   t.offset, begin, file_size_);
    }
    t.data = map_ + begin;
  }
}

const Value* GgufFile::find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {

[[noreturn]] void wrong_type(const std::filesystem::path& path, std::string_view key,
                             const Value& value, const char* expected) {
  VELLUM_THROW(ErrorCode::kInvalidModel, "{}: metadata key '{}' has type {}, expected {}",
               path.string(), key, value_type_name(value.type()), expected);
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::optional<int64_t> i = v->as_int();
  if (!i) wrong_type(path_, key, *v, "an integer (up to int64)");
  return i;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::optional<double> f = v->as_float();
  if (!f) wrong_type(path_, key, *v, "a number");
  return f;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::optional<bool> b = v->as_bool();
  if (!b) wrong_type(path_, key, *v, "bool");
  return b;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::string* s = v->as_string();
  if (s == nullptr) wrong_type(path_, key, *v, "string");
  return *s;
}

const Array& GgufFile::require_array(std::string_view key, const Value& value) const {
  const Array* a = value.as_array();
  if (a == nullptr) wrong_type(path_, key, value, "an array");
  return *a;
}

const std::vector<std::string>* GgufFile::find_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return nullptr;
  const Array& a = require_array(key, *v);
  const std::vector<std::string>* s = a.strings();
  VELLUM_CHECK(s != nullptr, ErrorCode::kInvalidModel,
               "{}: metadata key '{}' is an array of {}, expected an array of strings",
               path_.string(), key, value_type_name(a.element_type()));
  return s;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const std::vector<std::string>* s = find_string_array(key);
  return s == nullptr ? std::vector<std::string>{} : *s;
}

namespace {

// Converts a numeric array to Out; `ok` rejects element values Out cannot hold.
template <typename Out, typename Ok>
bool convert_array(const Array& a, std::vector<Out>& out, Ok ok) {
  return std::visit(
      [&](const auto& v) -> bool {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          out.resize(v.size());
          for (size_t i = 0; i < v.size(); ++i) {
            if (!ok(v[i])) return false;
            out[i] = static_cast<Out>(v[i]);
          }
          return true;
        } else {
          return false;
        }
      },
      a.storage());
}

}  // namespace

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return {};
  const Array& a = require_array(key, *v);
  std::vector<float> out;
  VELLUM_CHECK(convert_array(a, out, [](auto) { return true; }), ErrorCode::kInvalidModel,
               "{}: metadata key '{}' is an array of {}, expected an array of numbers",
               path_.string(), key, value_type_name(a.element_type()));
  return out;
}

std::vector<int32_t> GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return {};
  const Array& a = require_array(key, *v);
  std::vector<int32_t> out;
  const bool is_int = a.element_type() != ValueType::kF32 && a.element_type() != ValueType::kF64;
  const bool ok = is_int && convert_array(a, out, [](auto x) {
                    if constexpr (std::is_floating_point_v<decltype(x)>) {
                      return false;
                    } else {
                      return std::in_range<int32_t>(x);
                    }
                  });
  VELLUM_CHECK(ok, ErrorCode::kInvalidModel,
               "{}: metadata key '{}' is an array of {}, expected integers that fit in int32",
               path_.string(), key, value_type_name(a.element_type()));
  return out;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace vellum::gguf

#include "model/io/safetensors.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/check.h"

namespace vellum::model {
namespace {

// The reference implementation's limit; a larger header is a corrupt length field.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

}  // namespace

size_t safetensors_dtype_size(std::string_view dtype) {
  static const std::pair<std::string_view, size_t> kSizes[] = {
      {"F64", 8}, {"F32", 4},     {"F16", 2},     {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2},     {"I8", 1},      {"U64", 8},  {"U32", 4},
      {"U16", 2}, {"U8", 1},      {"BOOL", 1},    {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"F8_E8M0", 1},
  };
  for (const auto& [name, size] : kSizes) {
    if (name == dtype) return size;
  }
  return 0;
}

int64_t SafetensorsTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    VELLUM_THROW(ErrorCode::kIo, "cannot open safetensors file '{}': {}", name,
                 std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    VELLUM_THROW(ErrorCode::kIo, "'{}' is not a regular file", name);
  }
  file->file_size_ = static_cast<size_t>(st.st_size);
  if (file->file_size_ < 8) {
    ::close(fd);
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "{}: not a safetensors file ({} bytes, shorter than the 8-byte header length)",
                 name, file->file_size_);
  }
  void* map = ::mmap(nullptr, file->file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) {
    VELLUM_THROW(ErrorCode::kIo, "cannot memory-map '{}' ({} bytes): {}", name, file->file_size_,
                 std::strerror(map_err));
  }
  file->map_ = static_cast<const uint8_t*>(map);
  file->parse();  // on throw, ~SafetensorsFile unmaps
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), file_size_);
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse() {
  const std::string file = path_.string();
  uint64_t header_len = 0;
  std::memcpy(&header_len, map_, sizeof(header_len));  // little-endian hosts only (x86-64)
  VELLUM_CHECK(header_len <= kMaxHeaderBytes && header_len <= file_size_ - 8,
               ErrorCode::kInvalidModel,
               "{}: not a safetensors file or truncated: the header length {} does not fit the "
               "file of {} bytes",
               file, header_len, file_size_);
  const auto* header_begin = reinterpret_cast<const char*>(map_ + 8);
  VELLUM_CHECK(header_len >= 2 && header_begin[0] == '{', ErrorCode::kInvalidModel,
               "{}: not a safetensors file: the header is not a JSON object", file);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len);
  } catch (const nlohmann::json::exception& e) {
    VELLUM_THROW(ErrorCode::kInvalidModel, "{}: the safetensors header is not valid JSON: {}",
                 file, e.what());
  }
  VELLUM_CHECK(header.is_object(), ErrorCode::kInvalidModel,
               "{}: the safetensors header is not a JSON object", file);
  const uint8_t* data = map_ + 8 + header_len;
  const size_t data_size = file_size_ - 8 - header_len;

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      VELLUM_CHECK(value.is_object(), ErrorCode::kInvalidModel,
                   "{}: __metadata__ must be an object of strings", file);
      for (const auto& [mk, mv] : value.items()) {
        VELLUM_CHECK(mv.is_string(), ErrorCode::kInvalidModel,
                     "{}: __metadata__ value '{}' is not a string", file, mk);
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    VELLUM_CHECK(value.is_object() && value.contains("dtype") && value["dtype"].is_string() &&
                     value.contains("shape") && value["shape"].is_array() &&
                     value.contains("data_offsets") && value["data_offsets"].is_array() &&
                     value["data_offsets"].size() == 2,
                 ErrorCode::kInvalidModel,
                 "{}: tensor '{}' needs \"dtype\", \"shape\" and two \"data_offsets\"", file, key);
    SafetensorsTensor t;
    t.name = key;
    t.dtype = value["dtype"].get<std::string>();
    const size_t elem = safetensors_dtype_size(t.dtype);
    VELLUM_CHECK(elem != 0, ErrorCode::kInvalidModel, "{}: tensor '{}' has unknown dtype '{}'",
                 file, key, t.dtype);
    uint64_t num_elements = 1;
    for (const auto& d : value["shape"]) {
      VELLUM_CHECK(d.is_number_unsigned(), ErrorCode::kInvalidModel,
                   "{}: tensor '{}' has a shape entry that is not a non-negative integer: {}",
                   file, key, d.dump());
      const uint64_t dim = d.get<uint64_t>();
      VELLUM_CHECK(dim == 0 || num_elements <= std::numeric_limits<int64_t>::max() / dim,
                   ErrorCode::kInvalidModel, "{}: tensor '{}' has an impossibly large shape",
                   file, key);
      num_elements *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& offsets = value["data_offsets"];
    VELLUM_CHECK(offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
                 ErrorCode::kInvalidModel, "{}: tensor '{}' has non-integer data_offsets", file,
                 key);
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    VELLUM_CHECK(begin <= end && end <= data_size, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' has data_offsets [{}, {}] outside the data section of {} bytes "
                 "(is the file truncated?)",
                 file, key, begin, end, data_size);
    VELLUM_CHECK(end - begin == num_elements * elem, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' ({} [{}]) should hold {} bytes but its data_offsets span {}",
                 file, key, t.dtype, fmt::join(t.shape, ", "), num_elements * elem, end - begin);
    t.data = data + begin;
    t.nbytes = static_cast<size_t>(end - begin);
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.data < b.data; });
  // The tensors must tile the data section exactly.
  size_t expected = 0;
  for (const SafetensorsTensor& t : tensors_) {
    const auto begin = static_cast<size_t>(t.data - data);
    VELLUM_CHECK(begin == expected, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' starts at data offset {} but the previous tensor ends at {}: "
                 "tensors overlap or leave a gap; the file is corrupt",
                 file, t.name, begin, expected);
    expected = begin + t.nbytes;
  }
  VELLUM_CHECK(expected == data_size, ErrorCode::kInvalidModel,
               "{}: the data section has {} bytes but the tensors cover {}; the file is corrupt "
               "or has trailing bytes",
               file, data_size, expected);
  index_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

}  // namespace vellum::model

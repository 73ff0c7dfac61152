// An owning, 64-byte aligned, uninitialized byte buffer. Move-only: copies are explicit.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

namespace vellum {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t nbytes) : size_(nbytes) {
    if (nbytes == 0) return;
    const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    data_ = std::aligned_alloc(kAlignment, rounded);
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(data_); }

  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vellum

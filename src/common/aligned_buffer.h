// An owning, 64-byte aligned, uninitialized byte buffer. Move-only: copies are explicit.
// Buffers of 2 MiB or more (weights, KV cache pools, the bandwidth probe's) start on a 2 MiB
// boundary and ask for transparent huge pages over their whole 2 MiB pages (MADV_HUGEPAGE: most
// distributions enable THP only on request). With 4 KiB pages every 4 KiB of a weight stream, and
// every scattered block of a paged KV cache, costs a TLB miss and a page walk: measured on a Zen 4
// guest, 2 threads, reads of 2 KiB chunks in random order 13-14 -> 24 GB/s, paged-attention decode
// at 4K-32K context (8 kv heads) 20 -> 24.7-25.3 GiB/s, the bf16 decode GEMV at the machine's fast
// state 54 -> 63 GB/s. The partial last huge page is left to small pages, so the request costs no memory beyond
// what the buffer touches. Where THP is off (or madvise fails) the buffer just has small pages.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

#include <sys/mman.h>

namespace vellum {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugePage = size_t{2} << 20;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t nbytes) : size_(nbytes) {
    if (nbytes == 0) return;
    const size_t align = nbytes >= kHugePage ? kHugePage : kAlignment;
    const size_t rounded = (nbytes + align - 1) / align * align;  // aligned_alloc wants a multiple
    data_ = std::aligned_alloc(align, rounded);
    if (data_ == nullptr) throw std::bad_alloc();
    if (align == kHugePage) ::madvise(data_, nbytes / kHugePage * kHugePage, MADV_HUGEPAGE);
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

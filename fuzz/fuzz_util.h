// Helpers shared by the libFuzzer targets (scripts/fuzz.sh).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace vellum::fuzz {

// An in-memory file whose contents are replaced for each input, for readers that take a path.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("vellum-fuzz", 0)) {
    if (fd_ < 0) std::abort();
  }
  ~MemFile() { ::close(fd_); }
  // Replaces the contents; returns the path that opens them.
  std::string write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)) {
      std::abort();
    }
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

// A fuzz target's own invariant failed: report and crash so that libFuzzer keeps the input.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
  std::abort();
}

}  // namespace vellum::fuzz

// Errors that cross Vellum's public API.
//
// Programmer and configuration errors throw vellum::Error (see VELLUM_CHECK in
// src/common/check.h). Conditions that happen in normal operation (no free blocks, prompt too
// long, client gone) are return values, not exceptions.
#pragma once

#include <stdexcept>
#include <string>

namespace vellum {

enum class ErrorCode {
  kInvalidArgument,   // a caller passed a bad value (sampling parameter, option, request field)
  kInvalidModel,      // a model or vocabulary file is malformed or unsupported
  kIo,                // a file could not be opened, read or written
  kOutOfMemory,       // a configured memory budget cannot hold what was asked
  kNotFound,          // a named thing (tensor, request id, key) does not exist
  kUnsupported,       // valid input that this build cannot handle (architecture, tensor type)
  kInternal,          // a broken invariant: a bug in Vellum
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace vellum

#include "vellum/status.h"

namespace vellum {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInvalidModel: return "invalid_model";
    case ErrorCode::kIo: return "io_error";
    case ErrorCode::kOutOfMemory: return "out_of_memory";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kInternal: return "internal_error";
  }
  return "unknown";
}

}  // namespace vellum

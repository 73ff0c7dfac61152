// GGUF reader: arbitrary bytes as a .gguf file. Opening either succeeds with a consistent
// tensor table (every tensor inside the file) or throws vellum::Error; the metadata printer and
// the tokenizer loader then run on whatever opened.
#include <cstdint>
#include <cstdio>

#include "fuzz_util.h"
#include "gguf/gguf.h"
#include "gguf/gguf_print.h"
#include "tokenizer/tokenizer.h"
#include "vellum/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static vellum::fuzz::MemFile file;
  static std::FILE* sink = std::fopen("/dev/null", "w");
  const std::string path = file.write(data, size);
  std::unique_ptr<vellum::gguf::GgufFile> gguf;
  try {
    gguf = vellum::gguf::GgufFile::open(path);
  } catch (const vellum::Error&) {
    return 0;
  }
  for (const auto& tensor : gguf->tensors()) {
    if (gguf->data_offset() + tensor.offset + tensor.nbytes > gguf->file_size()) {
      vellum::fuzz::fail("a tensor lies outside the file");
    }
    volatile uint8_t first = tensor.nbytes > 0 ? tensor.data[0] : 0;
    volatile uint8_t last = tensor.nbytes > 0 ? tensor.data[tensor.nbytes - 1] : 0;
    (void)first;
    (void)last;
  }
  vellum::gguf::print_summary(*gguf, sink);
  try {
    if (gguf->find("tokenizer.ggml.tokens") != nullptr) {
      auto tokenizer = vellum::tokenizer::Tokenizer::from_gguf(*gguf);
      const auto ids = tokenizer->encode("Hello <s> world \xE2\x96\x81 \xF0\x9F\x98\x80");
      (void)tokenizer->decode(ids);
    }
  } catch (const vellum::Error&) {
  }
  return 0;
}

// Tokenizer: arbitrary bytes encoded with the built-in SentencePiece vocabulary (byte fallback),
// with and without special-token parsing. Valid UTF-8 must decode back to itself exactly, token
// by token through the incremental detokenizer too; invalid UTF-8 must be encoded or refused
// with vellum::Error, never crash.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unistd.h>

#include "fuzz_util.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/io/builtin_vocab.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "vellum/status.h"

namespace {

std::unique_ptr<vellum::tokenizer::Tokenizer> make_tokenizer() {
  vellum::gguf::GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  vellum::model::add_builtin_vocab(writer);
  char dir[] = "/tmp/vellum-fuzz-XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  const std::filesystem::path path = std::filesystem::path(dir) / "vocab.gguf";
  writer.write(path);
  auto file = vellum::gguf::GgufFile::open(path);
  auto tokenizer = vellum::tokenizer::Tokenizer::from_gguf(*file);
  std::filesystem::remove_all(dir);
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vellum::tokenizer;
  static const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = is_valid_utf8(text);
  // Text after a parsed special token gets SentencePiece's space prefix again, so only literal
  // encoding (parse_special off) must round-trip exactly.
  for (const bool parse_special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = tokenizer->encode(text, {.add_special = false, .parse_special = parse_special});
    } catch (const vellum::Error&) {
      if (valid) vellum::fuzz::fail("valid UTF-8 was refused");
      continue;
    }
    for (const int32_t id : ids) {
      if (id < 0 || id >= tokenizer->vocab_size()) vellum::fuzz::fail("token id out of range");
    }
    const std::string decoded =
        tokenizer->decode(ids, {.skip_special_tokens = false, .spaces_between_special_tokens = false});
    // SentencePiece writes spaces as U+2581, so a literal U+2581 in the text decodes to a space
    // (as in llama.cpp and sentencepiece itself).
    const bool exact = valid && !parse_special && text.find("\xE2\x96\x81") == std::string_view::npos;
    if (exact && decoded != text) vellum::fuzz::fail("decode(encode(text)) != text");
    IncrementalDetokenizer detokenizer(
        *tokenizer, DecodeOptions{.skip_special_tokens = false, .spaces_between_special_tokens = false});
    std::string streamed;
    for (const int32_t id : ids) streamed += detokenizer.step(id);
    streamed += detokenizer.finish();
    if (valid && streamed != decoded) vellum::fuzz::fail("the incremental detokenizer differs");
  }
  return 0;
}

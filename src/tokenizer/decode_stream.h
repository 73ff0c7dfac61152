// The one decoding procedure behind Tokenizer::decode and IncrementalDetokenizer: token ids go
// in one at a time, valid UTF-8 comes out as soon as it is certain. Because every rule here
// looks only at tokens already pushed, decoding a sequence in one call or token by token gives
// the same text by construction.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace vellum::tokenizer {

class DecodeStream {
 public:
  // `at_sequence_start`: the first token pushed begins the text (SPM's leading space is
  // dropped). The tokenizer must outlive the stream.
  DecodeStream(const Tokenizer& tokenizer, const DecodeOptions& options, bool at_sequence_start);

  // Appends the newly certain text to `out`. Throws vellum::Error (kInvalidArgument) for an id
  // out of range.
  void push(int32_t id, std::string& out);
  // Appends a held-back incomplete UTF-8 sequence as U+FFFD.
  void finish(std::string& out) { utf8_.finish(out); }
  // Forgets a held-back incomplete sequence (used after context tokens that are not emitted).
  void drop_pending();
  // Bytes held back because they may be the start of a multi-byte character.
  size_t num_pending_bytes() const { return utf8_.num_pending(); }

 private:
  enum class Last { kNothing, kRegular, kSpecial };

  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  bool strip_leading_space_;
  Last last_ = Last::kNothing;
  Utf8Sanitizer utf8_;
};

}  // namespace vellum::tokenizer

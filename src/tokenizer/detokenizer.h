// IncrementalDetokenizer: streaming text for one generated sequence (vLLM's detokenize_
// incrementally). Feed token ids as they are sampled; each call returns the newly stable text.
//
// Tokens here decode to context-free bytes, so vLLM's two offsets reduce to: read_offset = the
// number of tokens consumed, prefix_offset = the first token whose bytes are not all emitted yet
// (a multi-byte character still incomplete). Text is emitted only when it is valid UTF-8; the
// concatenation of all deltas plus finish() equals Tokenizer::decode of the same ids with the
// same options.
//
// Ownership: holds a reference to the Tokenizer, which must outlive it. Not thread-safe; one
// per sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tokenizer/decode_stream.h"
#include "tokenizer/tokenizer.h"

namespace vellum::tokenizer {

class IncrementalDetokenizer {
 public:
  // `prompt_ids` are context only: their text is not emitted, but they count as the start of
  // the sequence (so the first generated token keeps its leading space, as in vLLM) and set
  // the special-token spacing state. An incomplete character at the end of the prompt is
  // dropped.
  IncrementalDetokenizer(const Tokenizer& tokenizer, const DecodeOptions& options,
                         std::span<const int32_t> prompt_ids = {});

  // The new stable text after appending `ids`. Throws vellum::Error (kInvalidArgument) for an
  // id out of range.
  std::string step(std::span<const int32_t> ids);
  std::string step(int32_t id) { return step(std::span<const int32_t>(&id, 1)); }
  // At the end of the sequence: an incomplete trailing character, as U+FFFD (or nothing).
  std::string finish();

  // All text emitted so far (deltas concatenated).
  const std::string& output_text() const { return output_text_; }
  size_t num_tokens() const { return read_offset_; }
  size_t prefix_offset() const { return prefix_offset_; }
  size_t read_offset() const { return read_offset_; }

 private:
  DecodeStream stream_;
  std::string output_text_;
  size_t prefix_offset_ = 0;  // generated tokens, not counting the prompt
  size_t read_offset_ = 0;
};

}  // namespace vellum::tokenizer

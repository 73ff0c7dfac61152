#include "tokenizer/decode_stream.h"

namespace vellum::tokenizer {

DecodeStream::DecodeStream(const Tokenizer& tokenizer, const DecodeOptions& options,
                           bool at_sequence_start)
    : tokenizer_(tokenizer),
      options_(options),
      strip_leading_space_(at_sequence_start && tokenizer.vocab().add_space_prefix) {}

void DecodeStream::drop_pending() { utf8_ = Utf8Sanitizer(); }

void DecodeStream::push(int32_t id, std::string& out) {
  tokenizer_.check_id(id);
  const bool special = tokenizer_.is_special(id);
  if (special && options_.skip_special_tokens) return;
  std::string_view piece = tokenizer_.piece(id);
  if (special) {
    if (options_.spaces_between_special_tokens && last_ != Last::kNothing) utf8_.push(" ", out);
    last_ = Last::kSpecial;
    strip_leading_space_ = false;  // the text no longer starts with a space
  } else {
    if (options_.spaces_between_special_tokens && last_ == Last::kSpecial) utf8_.push(" ", out);
    last_ = Last::kRegular;
    if (strip_leading_space_ && !piece.empty()) {
      if (piece.front() == ' ') piece.remove_prefix(1);
      strip_leading_space_ = false;
    }
  }
  utf8_.push(piece, out);
}

}  // namespace vellum::tokenizer

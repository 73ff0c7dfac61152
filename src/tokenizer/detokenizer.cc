#include "tokenizer/detokenizer.h"

namespace vellum::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               const DecodeOptions& options,
                                               std::span<const int32_t> prompt_ids)
    : stream_(tokenizer, options, /*at_sequence_start=*/prompt_ids.empty()) {
  std::string discard;
  for (const int32_t id : prompt_ids) stream_.push(id, discard);
  stream_.drop_pending();
}

std::string IncrementalDetokenizer::step(std::span<const int32_t> ids) {
  std::string delta;
  for (const int32_t id : ids) {
    stream_.push(id, delta);
    ++read_offset_;
    if (stream_.num_pending_bytes() == 0) prefix_offset_ = read_offset_;
  }
  output_text_ += delta;
  return delta;
}

std::string IncrementalDetokenizer::finish() {
  std::string delta;
  stream_.finish(delta);
  prefix_offset_ = read_offset_;
  output_text_ += delta;
  return delta;
}

}  // namespace vellum::tokenizer

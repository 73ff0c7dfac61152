// Pre-tokenization by a sequence of regexes (PCRE2, UTF + UCP, JIT-compiled).
//
// Each regex splits every current piece of text into its matches and the gaps between them
// (HF `Split` with behavior "Isolated"; llama.cpp's unicode_regex_split). A regex sees one
// piece at a time, so look-arounds and `$` stop at the piece's edges.
//
// Thread-safety: immutable after construction; split() may be called concurrently (each call
// uses its own match data).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vellum::tokenizer {

class RegexSplitter {
 public:
  // Throws vellum::Error (kInvalidModel) naming the pattern when one does not compile.
  explicit RegexSplitter(std::vector<std::string> patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Splits `text` (valid UTF-8) into consecutive, non-empty pieces that cover it. The views
  // point into `text`. With no patterns the whole text is one piece.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace vellum::tokenizer

// TokenIndex: token text -> id, an open-addressing hash table over the vocabulary's strings.
//
// A 150k-token vocabulary needs a few million lookups at load (merges) and one per symbol
// while encoding; a flat table of (hash, id) slots costs about one cache miss per lookup where
// std::unordered_map costs several. The table views the token strings, which must outlive it
// and not change.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vellum::tokenizer {

class TokenIndex {
 public:
  TokenIndex() = default;
  // Indexes `tokens`; a text that occurs twice maps to its last id, as in llama.cpp.
  explicit TokenIndex(const std::vector<std::string>& tokens);

  // The id of `text`, or -1 when it is not a token.
  int32_t find(std::string_view text) const;
  bool contains(std::string_view text) const { return find(text) >= 0; }

 private:
  static uint64_t hash(std::string_view text);

  const std::vector<std::string>* tokens_ = nullptr;
  // (high 32 bits of the hash) << 32 | (id + 1); 0 marks an empty slot.
  std::vector<uint64_t> slots_;
  uint64_t mask_ = 0;
};

}  // namespace vellum::tokenizer

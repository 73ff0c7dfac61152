#include "tokenizer/token_index.h"

#include <functional>

namespace vellum::tokenizer {

uint64_t TokenIndex::hash(std::string_view text) {
  // libstdc++'s string hash is 64-bit Murmur-style; mix once more so both halves are usable.
  uint64_t h = std::hash<std::string_view>{}(text);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

TokenIndex::TokenIndex(const std::vector<std::string>& tokens) : tokens_(&tokens) {
  size_t num_slots = 16;
  while (num_slots < tokens.size() * 2) num_slots *= 2;
  slots_.assign(num_slots, 0);
  mask_ = num_slots - 1;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const uint64_t h = hash(tokens[id]);
    const uint64_t tag = h >> 32 << 32;
    for (uint64_t slot = h & mask_;; slot = (slot + 1) & mask_) {
      const uint64_t entry = slots_[slot];
      if (entry == 0) {
        slots_[slot] = tag | (id + 1);
        break;
      }
      if ((entry >> 32 << 32) == tag && tokens[(entry & 0xffffffffu) - 1] == tokens[id]) {
        slots_[slot] = tag | (id + 1);  // a later duplicate wins
        break;
      }
    }
  }
}

int32_t TokenIndex::find(std::string_view text) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash(text);
  const uint64_t tag = h >> 32 << 32;
  for (uint64_t slot = h & mask_;; slot = (slot + 1) & mask_) {
    const uint64_t entry = slots_[slot];
    if (entry == 0) return -1;
    if ((entry >> 32 << 32) == tag) {
      const auto id = static_cast<int32_t>((entry & 0xffffffffu) - 1);
      if ((*tokens_)[id] == text) return id;
    }
  }
}

}  // namespace vellum::tokenizer

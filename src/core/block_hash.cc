#include "core/block_hash.h"

#include <openssl/evp.h>

#include <bit>
#include <memory>

#include "common/check.h"

namespace vellum::core {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the canonical hash encoding writes integers in native (little-endian) order");

// Canonical encoding, appended to `out`:
//   parent digest (32 bytes) | u32 num_tokens | i32 tokens... |
//   u8 0 (no extra keys) or u8 1, u32 num_keys, then per key:
//     u8 0, u32 len, bytes              (string key)
//     u8 1, u32 len, bytes, i64 offset  (multimodal key)
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

const EVP_MD* sha256_md() {
  // Fetched once: the implicit fetch in EVP_sha256() costs a provider lookup per call.
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  VELLUM_CHECK(md != nullptr, ErrorCode::kInternal,
               "OpenSSL has no SHA256 provider; check the OpenSSL installation");
  return md;
}

BlockHash sha256(std::span<const uint8_t> data) {
  thread_local std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  BlockHash out;
  unsigned int len = 0;
  const bool ok = ctx && EVP_DigestInit_ex2(ctx.get(), sha256_md(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx.get(), data.data(), data.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx.get(), out.bytes.data(), &len) == 1 && len == 32;
  VELLUM_CHECK(ok, ErrorCode::kInternal, "SHA-256 computation failed in OpenSSL");
  return out;
}

}  // namespace

std::string BlockHash::to_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

ExtraKeysResult generate_block_hash_extra_keys(const ExtraKeySources& sources, int64_t start,
                                               int64_t end, int start_mm_idx) {
  std::vector<ExtraKey> keys;
  if (!sources.lora_name.empty()) keys.emplace_back(std::string(sources.lora_name));

  // Multimodal items overlapping [start, end) (vllm kv_cache_utils._gen_mm_extra_hash_keys).
  int mm_idx = start_mm_idx;
  const auto& mm = sources.mm_features;
  const int num_mm = static_cast<int>(mm.size());
  if (num_mm > 0 && mm.back().offset + mm.back().length >= start) {
    if (mm_idx < 0) {
      VELLUM_CHECK(-mm_idx <= num_mm, ErrorCode::kInvalidArgument,
                   "start_mm_idx {} is out of range for {} multimodal items", start_mm_idx, num_mm);
      mm_idx += num_mm;
    }
    while (mm_idx < num_mm) {
      const MultiModalFeature& item = mm[mm_idx];
      if (end <= item.offset) break;  // the block has not reached this item
      if (start > item.offset + item.length) {  // the block is past this item
        ++mm_idx;
        continue;
      }
      keys.emplace_back(MultiModalKey{item.identifier, item.offset - start});
      if (end >= item.offset + item.length) {
        ++mm_idx;  // the item ends in this block; the next one may start here too
      } else {
        break;
      }
    }
  }

  if (start == 0 && !sources.cache_salt.empty()) keys.emplace_back(std::string(sources.cache_salt));

  ExtraKeysResult result;
  result.next_mm_idx = mm_idx;
  if (!keys.empty()) result.keys = std::move(keys);
  return result;
}

BlockHash hash_block_tokens(const BlockHash& none_hash, const std::optional<BlockHash>& parent,
                            std::span<const TokenId> token_ids, const ExtraKeys& extra_keys) {
  thread_local std::vector<uint8_t> buf;
  buf.clear();
  const BlockHash& p = parent ? *parent : none_hash;
  buf.insert(buf.end(), p.bytes.begin(), p.bytes.end());
  put<uint32_t>(buf, static_cast<uint32_t>(token_ids.size()));
  for (TokenId t : token_ids) put<int32_t>(buf, t);
  if (!extra_keys) {
    put<uint8_t>(buf, 0);
  } else {
    put<uint8_t>(buf, 1);
    put<uint32_t>(buf, static_cast<uint32_t>(extra_keys->size()));
    for (const ExtraKey& key : *extra_keys) {
      if (const auto* s = std::get_if<std::string>(&key)) {
        put<uint8_t>(buf, 0);
        put_string(buf, *s);
      } else {
        const auto& mm = std::get<MultiModalKey>(key);
        put<uint8_t>(buf, 1);
        put_string(buf, mm.first);
        put<int64_t>(buf, mm.second);
      }
    }
  }
  return sha256(buf);
}

BlockHasher::BlockHasher(int block_size, std::string_view seed) : block_size_(block_size) {
  VELLUM_CHECK(block_size > 0, ErrorCode::kInvalidArgument,
               "block_size must be positive, got {}", block_size);
  std::string material = "vellum.none_hash";
  material.append(seed);
  none_hash_ = sha256(std::span(reinterpret_cast<const uint8_t*>(material.data()), material.size()));
}

void BlockHasher::extend_block_hashes(std::span<const TokenId> all_token_ids,
                                      const ExtraKeySources& sources,
                                      std::vector<BlockHash>& block_hashes) const {
  int64_t start = static_cast<int64_t>(block_hashes.size()) * block_size_;
  const auto num_tokens = static_cast<int64_t>(all_token_ids.size());
  if (start + block_size_ > num_tokens) return;
  // Resume the multimodal scan at the last item when continuing a sequence.
  int mm_idx = start > 0 ? -1 : 0;
  if (sources.mm_features.empty()) mm_idx = 0;
  std::optional<BlockHash> parent;
  if (!block_hashes.empty()) parent = block_hashes.back();
  for (; start + block_size_ <= num_tokens; start += block_size_) {
    ExtraKeysResult extra =
        generate_block_hash_extra_keys(sources, start, start + block_size_, mm_idx);
    mm_idx = extra.next_mm_idx;
    BlockHash h = hash_block_tokens(none_hash_, parent,
                                    all_token_ids.subspan(static_cast<size_t>(start), block_size_),
                                    extra.keys);
    block_hashes.push_back(h);
    parent = h;
  }
}

}  // namespace vellum::core

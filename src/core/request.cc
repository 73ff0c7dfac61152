#include "core/request.h"

#include "common/check.h"

namespace vellum::core {

const char* finish_reason_string(RequestStatus s) {
  switch (s) {
    case RequestStatus::kFinishedStopped:
      return "stop";
    case RequestStatus::kFinishedLengthCapped:
    case RequestStatus::kFinishedIgnored:
      return "length";
    case RequestStatus::kFinishedAborted:
      return "abort";
    case RequestStatus::kFinishedError:
      return "error";
    default:
      return nullptr;
  }
}

Request::Request(std::string request_id, std::vector<TokenId> prompt_token_ids,
                 RequestParams params, std::optional<BlockHasher> block_hasher)
    : request_id_(std::move(request_id)),
      params_(std::move(params)),
      prompt_token_ids_(std::move(prompt_token_ids)),
      all_token_ids_(prompt_token_ids_),
      block_hasher_(std::move(block_hasher)) {
  update_block_hashes();
}

ExtraKeySources Request::extra_key_sources() const {
  ExtraKeySources sources;
  sources.mm_features = params_.mm_features;
  if (params_.lora_id != 0) sources.lora_name = params_.lora_name;
  sources.cache_salt = params_.cache_salt;
  return sources;
}

void Request::append_output_token_ids(TokenId token_id) {
  output_token_ids_.push_back(token_id);
  all_token_ids_.push_back(token_id);
  update_block_hashes();
}

void Request::append_output_token_ids(std::span<const TokenId> token_ids) {
  output_token_ids_.insert(output_token_ids_.end(), token_ids.begin(), token_ids.end());
  all_token_ids_.insert(all_token_ids_.end(), token_ids.begin(), token_ids.end());
  update_block_hashes();
}

void Request::update_block_hashes() {
  if (!block_hasher_) return;
  block_hasher_->extend_block_hashes(all_token_ids_, extra_key_sources(), block_hashes_);
}

}  // namespace vellum::core

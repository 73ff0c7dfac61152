#include "core/scheduler/scheduler_config.h"

#include "common/check.h"

namespace vellum::core {

void SchedulerConfig::validate() const {
  VELLUM_CHECK(max_num_seqs >= 1, ErrorCode::kInvalidArgument,
               "max_num_seqs must be at least 1, got {}", max_num_seqs);
  VELLUM_CHECK(max_model_len >= 1, ErrorCode::kInvalidArgument,
               "max_model_len must be at least 1, got {}", max_model_len);
  VELLUM_CHECK(max_num_batched_tokens >= max_num_seqs, ErrorCode::kInvalidArgument,
               "max_num_batched_tokens ({}) must be greater than or equal to max_num_seqs ({}); "
               "raise max_num_batched_tokens or lower max_num_seqs",
               max_num_batched_tokens, max_num_seqs);
  VELLUM_CHECK(enable_chunked_prefill || max_num_batched_tokens >= max_model_len,
               ErrorCode::kInvalidArgument,
               "max_num_batched_tokens ({}) is smaller than max_model_len ({}) with chunked "
               "prefill disabled, so longer prompts could never be scheduled; increase "
               "max_num_batched_tokens, decrease max_model_len or enable chunked prefill",
               max_num_batched_tokens, max_model_len);
  VELLUM_CHECK(max_num_scheduled_tokens >= 0 && max_num_scheduled_tokens <= max_num_batched_tokens,
               ErrorCode::kInvalidArgument,
               "max_num_scheduled_tokens ({}) must be in [0, max_num_batched_tokens ({})]; 0 means "
               "max_num_batched_tokens",
               max_num_scheduled_tokens, max_num_batched_tokens);
  VELLUM_CHECK(long_prefill_token_threshold >= 0, ErrorCode::kInvalidArgument,
               "long_prefill_token_threshold must be >= 0 (0 disables it), got {}",
               long_prefill_token_threshold);
  VELLUM_CHECK(num_lookahead_tokens >= 0, ErrorCode::kInvalidArgument,
               "num_lookahead_tokens must be >= 0, got {}", num_lookahead_tokens);
}

}  // namespace vellum::core

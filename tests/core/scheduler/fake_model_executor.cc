#include "fake_model_executor.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace vellum::core::testing {

FakeModelExecutor::FakeModelExecutor(int num_blocks, int block_size, int num_host_blocks,
                                     int vocab_size)
    : block_size_(block_size),
      vocab_size_(vocab_size),
      device_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size)),
      host_(static_cast<size_t>(num_host_blocks) * static_cast<size_t>(block_size)) {}

FakeModelExecutor::Slot& FakeModelExecutor::device_slot(BlockId block, int offset) {
  const size_t index = static_cast<size_t>(block) * static_cast<size_t>(block_size_) +
                       static_cast<size_t>(offset);
  if (block <= 0 || index >= device_.size()) {
    throw std::runtime_error(fmt::format("fake executor: bad device block {}", block));
  }
  return device_[index];
}

TokenId FakeModelExecutor::next_token(std::span<const TokenId> context, int vocab_size) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the context
  for (TokenId t : context) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(t));
    h *= 1099511628211ull;
  }
  h ^= h >> 29;
  return static_cast<TokenId>(h % static_cast<uint64_t>(vocab_size));
}

std::vector<TokenId> FakeModelExecutor::reference_generate(std::span<const TokenId> prompt,
                                                           const FakeStopRule& rule,
                                                           int vocab_size) {
  std::vector<TokenId> context(prompt.begin(), prompt.end());
  std::vector<TokenId> output;
  while (true) {
    const TokenId t = next_token(context, vocab_size);
    context.push_back(t);
    output.push_back(t);
    const int n = static_cast<int>(output.size());
    if (static_cast<int>(context.size()) >= rule.max_model_len) break;
    if (n < rule.min_tokens) continue;
    if (rule.eos_token_id && t == *rule.eos_token_id) break;
    if (n >= rule.max_tokens) break;
  }
  return output;
}

ModelRunnerOutput FakeModelExecutor::execute(const SchedulerOutput& out) {
  // 1. swap-outs read device blocks that may be reused in this very step.
  auto copy_block = [&](std::vector<Slot>& dst, BlockId d, const std::vector<Slot>& src, BlockId s) {
    const auto bs = static_cast<size_t>(block_size_);
    if (static_cast<size_t>(d + 1) * bs > dst.size() || static_cast<size_t>(s + 1) * bs > src.size()) {
      throw std::runtime_error(fmt::format("fake executor: block move {} -> {} out of range", s, d));
    }
    std::copy_n(src.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(s) * bs), bs,
                dst.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(d) * bs));
  };
  for (const BlockSwap& m : out.blocks_to_swap_out) copy_block(host_, m.dst, device_, m.src);
  for (const BlockSwap& m : out.blocks_to_swap_in) copy_block(device_, m.dst, host_, m.src);
  for (const BlockCopy& c : out.blocks_to_copy) copy_block(device_, c.dst, device_, c.src);
  num_swapped_out_blocks_ += static_cast<int64_t>(out.blocks_to_swap_out.size());
  num_swapped_in_blocks_ += static_cast<int64_t>(out.blocks_to_swap_in.size());
  num_copied_blocks_ += static_cast<int64_t>(out.blocks_to_copy.size());

  ModelRunnerOutput result;
  for (const ScheduledRequest& s : out.scheduled_requests) {
    if (static_cast<int>(s.token_ids.size()) != s.num_scheduled_tokens) {
      throw std::runtime_error(fmt::format("request {}: {} token ids for {} scheduled tokens",
                                           s.request_id, s.token_ids.size(),
                                           s.num_scheduled_tokens));
    }
    // The context this step sees: what was computed before plus this step's tokens.
    std::vector<TokenId> context(s.request->all_token_ids().begin(),
                                 s.request->all_token_ids().begin() + s.num_computed_tokens);
    context.insert(context.end(), s.token_ids.begin(), s.token_ids.end());
    const int end = static_cast<int>(context.size());
    if (static_cast<int>(s.block_ids().size()) * block_size_ < end) {
      throw std::runtime_error(fmt::format("request {}: {} blocks cannot hold {} tokens",
                                           s.request_id, s.block_ids().size(), end));
    }
    for (int p = s.num_computed_tokens; p < end; ++p) {
      device_slot(s.block_ids()[static_cast<size_t>(p / block_size_)], p % block_size_) =
          Slot{context[static_cast<size_t>(p)], p};
    }
    for (int p = 0; p < end; ++p) {
      const BlockId b = s.block_ids()[static_cast<size_t>(p / block_size_)];
      const Slot& slot = device_slot(b, p % block_size_);
      if (slot.token != context[static_cast<size_t>(p)] || slot.position != p) {
        throw std::runtime_error(fmt::format(
            "request {}: position {} (block {}, offset {}) holds token {} at position {}, "
            "expected token {}",
            s.request_id, p, b, p % block_size_, slot.token, slot.position,
            context[static_cast<size_t>(p)]));
      }
    }
    result.req_ids.push_back(s.request_id);
    if (s.samples_token) {
      // Context up to the last real token (drafts are not used by these tests).
      result.sampled_token_ids.push_back({next_token(context, vocab_size_)});
    } else {
      result.sampled_token_ids.emplace_back();
    }
  }
  return result;
}

}  // namespace vellum::core::testing

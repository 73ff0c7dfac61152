#include "engine/spec_decode/spec_decoder.h"

#include <algorithm>

#include "common/check.h"
#include "engine/spec_decode/ngram_proposer.h"
#include "engine/spec_decode/suffix_proposer.h"

namespace vellum::engine {
namespace {

std::unique_ptr<Proposer> make_proposer(const SpeculativeConfig& config) {
  if (config.method == ProposerMethod::kSuffix) return std::make_unique<SuffixProposer>(config);
  return std::make_unique<NgramProposer>(config.prompt_lookup_min, config.prompt_lookup_max);
}

// Running, every token but the last computed: the request samples in its next step.
bool in_decode_phase(const core::Request& request) {
  return request.status == core::RequestStatus::kRunning &&
         request.num_computed_tokens == request.num_tokens() - 1;
}

}  // namespace

int num_accepted_drafts(std::span<const int32_t> drafts, std::span<const int32_t> row_tokens) {
  VELLUM_CHECK(row_tokens.size() >= drafts.size(), ErrorCode::kInternal,
               "verification has {} target tokens for {} drafts", row_tokens.size(),
               drafts.size());
  const auto mismatch = std::mismatch(drafts.begin(), drafts.end(), row_tokens.begin());
  return static_cast<int>(mismatch.first - drafts.begin());
}

SpecDecoder::SpecDecoder(const SpeculativeConfig& config)
    : config_(config), proposer_(make_proposer(config)), gate_(config.gate) {
  counters_.num_accepted_tokens_per_pos.assign(static_cast<size_t>(config.num_speculative_tokens),
                                               0);
}

void SpecDecoder::propose(core::Scheduler& scheduler,
                          const std::function<bool(const core::Request&)>& may_speculate) {
  std::vector<const core::Request*> decoding;
  const std::vector<std::string> running_ids = scheduler.running_request_ids();
  proposer_->retain_only(running_ids);
  gate_.retain_only(running_ids);
  for (const std::string& id : running_ids) {
    const core::Request* request = scheduler.get_request(id);
    if (request != nullptr && in_decode_phase(*request)) decoding.push_back(request);
  }
  const int max_model_len = scheduler.config().max_model_len;
  for (const core::Request* request : decoding) {
    std::vector<int32_t> drafts;
    // The bonus token is emitted besides the accepted drafts: leave room for it.
    const int room = std::min(request->params().stop.max_tokens - request->num_output_tokens(),
                              max_model_len - request->num_tokens()) - 1;
    const int max_drafts = std::min(config_.num_speculative_tokens, room);
    if (max_drafts > 0 && may_speculate(*request) &&
        gate_.allows(request->request_id(), static_cast<int>(decoding.size()))) {
      drafts = proposer_->propose(request->request_id(), request->all_token_ids(), max_drafts);
    }
    if (drafts.empty() && request->spec_token_ids.empty()) continue;
    scheduler.set_draft_token_ids(request->request_id(), std::move(drafts));
  }
}

int SpecDecoder::verify(std::string_view request_id, std::span<const int32_t> drafts,
                        std::span<const int32_t> row_tokens) {
  const int num_accepted = num_accepted_drafts(drafts, row_tokens);
  if (drafts.empty()) return 0;
  gate_.record(request_id, static_cast<int>(drafts.size()), num_accepted);
  ++counters_.num_drafts;
  counters_.num_draft_tokens += static_cast<int64_t>(drafts.size());
  counters_.num_accepted_tokens += num_accepted;
  for (int pos = 0; pos < num_accepted; ++pos) {
    ++counters_.num_accepted_tokens_per_pos[static_cast<size_t>(pos)];
  }
  return num_accepted;
}

}  // namespace vellum::engine

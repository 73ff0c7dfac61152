// Scheduler: construction, admission and schedule() (the planning half of a step). The update
// half (update_from_output, finishing, stats, invariants) is in scheduler_update.cc.
#include "core/scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "common/check.h"
#include "common/logging.h"

namespace vellum::core {

Scheduler::Scheduler(const SchedulerConfig& config, const KVCacheConfig& kv_config)
    : config_(config), kv_(kv_config), waiting_(config.policy), swapped_(config.policy) {
  config_.validate();
  VELLUM_CHECK(config_.max_model_len == kv_config.max_model_len, ErrorCode::kInvalidArgument,
               "SchedulerConfig.max_model_len ({}) differs from KVCacheConfig.max_model_len ({}); "
               "set both from the model config",
               config_.max_model_len, kv_config.max_model_len);
}

void Scheduler::add_request(std::shared_ptr<Request> request) {
  VELLUM_CHECK(request != nullptr, ErrorCode::kInvalidArgument, "add_request: null request");
  const std::string& id = request->request_id();
  VELLUM_CHECK(!requests_.contains(id), ErrorCode::kInvalidArgument,
               "request id {} is already in the scheduler; request ids must be unique", id);
  VELLUM_CHECK(request->status == RequestStatus::kWaiting && request->num_computed_tokens == 0,
               ErrorCode::kInvalidArgument,
               "request {} must be new (status waiting, nothing computed) when added", id);
  VELLUM_CHECK(request->num_tokens() > 0 && request->num_tokens() < config_.max_model_len,
               ErrorCode::kInvalidArgument,
               "request {} has {} tokens but must have 1..{} (max_model_len {} minus one for the "
               "first output); reject it with validate_prompt_len before adding",
               id, request->num_tokens(), config_.max_model_len - 1, config_.max_model_len);
  if (kv_.config().enable_caching) {
    VELLUM_CHECK(request->block_hasher().has_value() &&
                     request->block_hasher()->block_size() == kv_.block_size(),
                 ErrorCode::kInvalidArgument,
                 "request {} needs a BlockHasher with block size {} because prefix caching is on",
                 id, kv_.block_size());
  }
  const int num_seqs = request->params().max_num_seqs_in_group;
  VELLUM_CHECK(num_seqs >= 1 && num_seqs <= config_.max_num_seqs, ErrorCode::kInvalidArgument,
               "request {} needs {} sequences at once but max_num_seqs is {}; lower n (or the "
               "beam width) or raise max_num_seqs",
               id, num_seqs, config_.max_num_seqs);
  waiting_.add(request.get());
  requests_.emplace(id, std::move(request));
}

int Scheduler::num_new_tokens_for(const Request& request, int token_budget) const {
  int n = request.num_tokens_with_spec() - request.num_computed_tokens;
  const int threshold = config_.long_prefill_token_threshold;
  if (threshold > 0 && threshold < n) n = threshold;
  n = std::min(n, token_budget);
  // The input position must stay below max_model_len (matters with draft tokens).
  n = std::min(n, config_.max_model_len - 1 - request.num_computed_tokens);
  return std::max(n, 0);
}

void Scheduler::preempt(Request& request, bool force_recompute) {
  VELLUM_ASSERT(request.status == RequestStatus::kRunning);
  const std::string& id = request.request_id();
  request.spec_token_ids.clear();
  request.num_scheduled_draft_tokens = 0;
  ++request.num_preemptions;
  ++num_preemptions_total_;
  ++num_preemptions_since_stats_;
  pending_preempted_ids_.push_back(id);

  if (config_.preemption_mode == PreemptionMode::kSwap && !force_recompute) {
    const std::string ids[] = {id};
    if (kv_.is_resident(id) && kv_.can_swap_out(ids)) {
      std::vector<BlockSwap> moves = kv_.swap_out(ids);
      pending_swap_out_.insert(pending_swap_out_.end(), moves.begin(), moves.end());
      request.status = RequestStatus::kSwapped;
      // Like waiting.prepend for recompute: the oldest victim is swapped back in first.
      swapped_.prepend(&request);
      return;
    }
    if (!warned_swap_fallback_) {
      VELLUM_LOG_WARN(
          "preempting request {} by recompute: the swap space has {} free blocks, too few for "
          "its KV cache; raise --swap-space to swap instead (further fallbacks are not logged)",
          id, kv_.num_free_host_blocks());
      warned_swap_fallback_ = true;
    }
  }
  kv_.free(id);
  request.status = RequestStatus::kPreempted;
  request.num_computed_tokens = 0;
  waiting_.prepend(&request);
}

std::vector<Request*> Scheduler::running_members(const Request& request) const {
  std::vector<Request*> members;
  for (Request* r : running_) {
    if (r->group_id() == request.group_id()) members.push_back(r);
  }
  return members;
}

std::vector<Request*> Scheduler::waiting_members(const Request& request) const {
  std::vector<Request*> members;
  for (Request* r : waiting_.requests()) {
    if (r->group_id() == request.group_id()) members.push_back(r);
  }
  return members;
}

int Scheduler::num_running_seats() const {
  int seats = 0;
  std::vector<std::string_view> seen;
  for (const Request* r : running_) {
    if (r->params().max_num_seqs_in_group <= 1) {
      ++seats;
      continue;
    }
    if (std::find(seen.begin(), seen.end(), r->group_id()) != seen.end()) continue;
    seen.push_back(r->group_id());
    seats += r->params().max_num_seqs_in_group;
  }
  return seats;
}

int Scheduler::seats_needed(const Request& request) const {
  for (const Request* r : running_) {
    if (r->group_id() == request.group_id()) return 0;
  }
  return std::max(request.params().max_num_seqs_in_group, 1);
}

std::vector<int> Scheduler::plan_unit_tokens(std::span<Request* const> unit,
                                             int token_budget) const {
  std::vector<int> tokens(unit.size(), 0);
  if (unit.size() == 1) {
    tokens[0] = num_new_tokens_for(*unit[0], token_budget);
    return tokens;
  }
  // Finish together if every member can compute all its remaining tokens within the budget.
  bool finish = true;
  int total = 0;
  for (size_t m = 0; m < unit.size(); ++m) {
    const int remaining = unit[m]->num_tokens_with_spec() - unit[m]->num_computed_tokens;
    const int capped = num_new_tokens_for(*unit[m], std::numeric_limits<int>::max());
    finish = finish && remaining > 0 && capped == remaining;
    total += remaining;
  }
  finish = finish && total <= token_budget;
  for (size_t m = 0; m < unit.size(); ++m) {
    const int remaining = unit[m]->num_tokens_with_spec() - unit[m]->num_computed_tokens;
    int n = num_new_tokens_for(*unit[m], token_budget);
    if (!finish) n = std::min(n, remaining - 1);
    tokens[m] = std::max(n, 0);
    token_budget -= tokens[m];
  }
  return tokens;
}

void Scheduler::preempt_unit(Request* victim, int& token_budget, std::vector<Planned>& planned,
                             std::vector<Request*>& preempted) {
  const bool lockstep = victim->params().lockstep_group;
  std::vector<Request*> members = lockstep ? running_members(*victim) : std::vector{victim};
  // Last member first: each one is prepended to the waiting queue, which keeps running order.
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    Request* member = *it;
    running_.erase(std::find(running_.begin(), running_.end(), member));
    // Already served this step (priority policy, or an earlier member of the unit): undo it.
    auto p = std::find_if(planned.begin(), planned.end(),
                          [&](const Planned& x) { return x.request == member; });
    if (p != planned.end()) {
      token_budget += p->num_tokens;
      planned.erase(p);
    }
    // A lockstep group resumes together from the waiting queue; swapped members could come back
    // one at a time.
    preempt(*member, /*force_recompute=*/lockstep);
    preempted.push_back(member);
  }
}

void Scheduler::schedule_running(int& token_budget, int running_limit,
                                 std::vector<Planned>& planned, std::vector<Request*>& preempted) {
  size_t i = 0;
  while (i < running_.size() && token_budget > 0 &&
         static_cast<int64_t>(planned.size()) < running_limit) {
    Request* request = running_[i];
    // A unit is served whole: a request, or a lockstep group (from its first running member).
    std::vector<Request*> unit = {request};
    if (request->params().lockstep_group) {
      unit = running_members(*request);
      if (unit.front() != request) {
        ++i;
        continue;
      }
    }
    const std::vector<int> num_tokens = plan_unit_tokens(unit, token_budget);
    bool unit_preempted = false;
    for (size_t m = 0; m < unit.size() && !unit_preempted; ++m) {
      // Zero: nothing to compute now (e.g. its last step's token is not back yet with
      // overlapping steps, or a lockstep member waiting for the others). Skip rather than stop,
      // as vLLM does.
      if (num_tokens[m] == 0) continue;
      AllocateSlotsArgs args;
      args.num_new_tokens = num_tokens[m];
      args.num_lookahead_tokens = config_.num_lookahead_tokens;
      while (!kv_.allocate_slots(*unit[m], args).has_value()) {
        size_t victim_idx = running_.size() - 1;  // FCFS: the newest running request
        if (config_.policy == SchedulingPolicy::kPriority) {
          // The worst (priority, arrival_time); the first one on ties, like Python's max().
          victim_idx = 0;
          for (size_t j = 1; j < running_.size(); ++j) {
            const auto& p = running_[j]->params();
            const auto& q = running_[victim_idx]->params();
            if (std::tie(p.priority, p.arrival_time) > std::tie(q.priority, q.arrival_time)) {
              victim_idx = j;
            }
          }
        }
        Request* victim = running_[victim_idx];
        unit_preempted = std::find(unit.begin(), unit.end(), victim) != unit.end();
        preempt_unit(victim, token_budget, planned, preempted);
        // It preempted itself: nothing left to take blocks from.
        if (unit_preempted) break;
      }
      if (unit_preempted) break;
      planned.push_back({unit[m], num_tokens[m], ScheduledKind::kRunning});
      token_budget -= num_tokens[m];
    }
    if (unit_preempted) break;
    // Preemptions may have removed requests before this one.
    i = static_cast<size_t>(std::find(running_.begin(), running_.end(), request) -
                            running_.begin()) + 1;
  }
}

void Scheduler::schedule_swapped(int& token_budget, std::vector<Planned>& planned) {
  while (!swapped_.empty() && token_budget > 0) {
    Request* request = swapped_.peek();
    if (num_running_seats() + seats_needed(*request) > config_.max_num_seqs) break;
    const Request* const group[] = {request};
    const AllocStatus status = kv_.can_swap_in(group, config_.num_lookahead_tokens);
    if (status == AllocStatus::kLater) break;
    swapped_.pop();
    if (status == AllocStatus::kNever) {
      VELLUM_LOG_WARN(
          "failing request {}: its {} tokens can never be swapped back into a KV cache of {} "
          "blocks",
          request->request_id(), request->num_tokens(), kv_.block_pool().num_blocks() - 1);
      request->status = RequestStatus::kFinishedIgnored;
      EngineCoreOutput out;
      out.request_id = request->request_id();
      out.status = request->status;
      out.num_cached_tokens = std::max(request->num_cached_tokens, 0);
      out.num_prompt_tokens = request->num_prompt_tokens();
      pending_outputs_.push_back(std::move(out));
      free_request(*request);
      continue;
    }
    std::vector<BlockSwap> moves = kv_.swap_in(group);
    request->status = RequestStatus::kRunning;
    running_.push_back(request);
    // The mappings must reach the runner even if no token is scheduled for it below.
    swap_in_moves_.insert(swap_in_moves_.end(), moves.begin(), moves.end());
    const int n = num_new_tokens_for(*request, token_budget);
    if (n == 0) continue;  // resident again; phase 1 serves it next step
    AllocateSlotsArgs args;
    args.num_new_tokens = n;
    args.num_lookahead_tokens = config_.num_lookahead_tokens;
    // can_swap_in counted the slots for every unseen token, so this fits.
    if (!kv_.allocate_slots(*request, args).has_value()) break;
    planned.push_back({request, n, ScheduledKind::kSwappedIn});
    token_budget -= n;
  }
}

void Scheduler::schedule_waiting(int& token_budget, std::vector<Planned>& planned) {
  while (!waiting_.empty() && token_budget > 0) {
    Request* request = waiting_.peek();
    if (num_running_seats() + seats_needed(*request) > config_.max_num_seqs) break;
    VELLUM_ASSERT(request->num_computed_tokens == 0);
    if (request->params().lockstep_group && waiting_members(*request).size() > 1) {
      if (!admit_lockstep_group(request, token_budget, planned)) break;  // head-of-line
      continue;
    }
    ComputedBlocks hit = kv_.get_computed_blocks(*request);
    int n = request->num_tokens() - hit.num_computed_tokens;
    const int threshold = config_.long_prefill_token_threshold;
    if (threshold > 0 && threshold < n) n = threshold;
    // Without chunked prefill the whole prompt must fit; no skipping ahead (head-of-line).
    if (!config_.enable_chunked_prefill && n > token_budget) break;
    n = std::min(n, token_budget);
    VELLUM_ASSERT(n > 0);  // a hit never covers the last token
    AllocateSlotsArgs args;
    args.num_new_tokens = n;
    args.num_new_computed_tokens = hit.num_computed_tokens;
    args.new_computed_blocks = std::move(hit.groups);
    args.num_lookahead_tokens = 0;  // no drafts before the first step
    args.full_sequence_must_fit = config_.scheduler_reserve_full_isl;
    if (!kv_.allocate_slots(*request, args).has_value()) break;  // strict head-of-line
    waiting_.pop();
    running_.push_back(request);
    const ScheduledKind kind = request->status == RequestStatus::kWaiting ? ScheduledKind::kNew
                                                                          : ScheduledKind::kResumed;
    request->status = RequestStatus::kRunning;
    request->num_computed_tokens = hit.num_computed_tokens;
    if (request->num_cached_tokens < 0) request->num_cached_tokens = hit.num_computed_tokens;
    planned.push_back({request, n, kind});
    token_budget -= n;
  }
}

bool Scheduler::admit_lockstep_group(Request* head, int& token_budget,
                                     std::vector<Planned>& planned) {
  const std::vector<Request*> unit = waiting_members(*head);
  // Estimated remaining tokens (members after the first may hit more of the cache once the
  // first has allocated): they decide whether the group can finish its prefill together. The
  // lookups count twice in the prefix-cache stats; group resumes are rare.
  int total = 0;
  bool finish = true;
  for (Request* r : unit) {
    const int remaining = r->num_tokens() - kv_.get_computed_blocks(*r).num_computed_tokens;
    const int threshold = config_.long_prefill_token_threshold;
    finish = finish && !(threshold > 0 && threshold < remaining);
    total += remaining;
  }
  finish = finish && total <= token_budget;
  if (!finish && !config_.enable_chunked_prefill) return false;

  std::vector<int> num_tokens;
  int budget = token_budget;
  size_t num_allocated = 0;
  for (Request* r : unit) {
    ComputedBlocks hit = kv_.get_computed_blocks(*r);
    if (!finish && r->num_tokens() - hit.num_computed_tokens < 2 && !hit.block_ids().empty()) {
      // Keep at least one token to compute without sampling: give up the last hit block (the
      // whole hit with sliding-window groups: a shorter run may not cover the window).
      const int keep = kv_.has_sliding_window_groups()
                           ? 0
                           : static_cast<int>(hit.block_ids().size()) - 1;
      hit.truncate(keep, kv_.block_size());
    }
    int n = r->num_tokens() - hit.num_computed_tokens;
    const int threshold = config_.long_prefill_token_threshold;
    if (threshold > 0 && threshold < n) n = threshold;
    if (!finish) n = std::min({n, r->num_tokens() - hit.num_computed_tokens - 1, budget});
    if (n <= 0) break;
    AllocateSlotsArgs args;
    args.num_new_tokens = n;
    args.num_new_computed_tokens = hit.num_computed_tokens;
    args.new_computed_blocks = std::move(hit.groups);
    args.full_sequence_must_fit = config_.scheduler_reserve_full_isl;
    if (!kv_.allocate_slots(*r, args).has_value()) break;
    r->num_computed_tokens = hit.num_computed_tokens;
    num_tokens.push_back(n);
    budget -= n;
    ++num_allocated;
  }
  if (num_allocated < unit.size()) {
    // All or none: release what the first members took. (Their blocks return to the free queue
    // and stay cached, so the next attempt hits them again.)
    for (size_t m = 0; m < num_allocated; ++m) {
      kv_.free(unit[m]->request_id());
      unit[m]->num_computed_tokens = 0;
    }
    return false;
  }
  for (size_t m = 0; m < unit.size(); ++m) {
    Request* r = unit[m];
    waiting_.remove(r);
    running_.push_back(r);
    const ScheduledKind kind =
        r->status == RequestStatus::kWaiting ? ScheduledKind::kNew : ScheduledKind::kResumed;
    r->status = RequestStatus::kRunning;
    planned.push_back({r, num_tokens[m], kind});
  }
  token_budget = budget;
  return true;
}

ScheduledRequest Scheduler::commit(const Planned& planned) {
  Request& request = *planned.request;
  ScheduledRequest s;
  s.request_id = request.request_id();
  s.request = shared(request);
  s.kind = planned.kind;
  s.num_computed_tokens = request.num_computed_tokens;
  s.num_scheduled_tokens = planned.num_tokens;
  const int begin = request.num_computed_tokens;
  const int end = begin + planned.num_tokens;
  const auto all = request.all_token_ids();
  const int num_real_end = std::min(end, request.num_tokens());
  if (begin < num_real_end) s.token_ids.assign(all.begin() + begin, all.begin() + num_real_end);
  // Draft tokens occupy positions [num_tokens, num_tokens + spec).
  const int num_spec = end - std::max(begin, request.num_tokens());
  if (num_spec > 0) {
    const int skip = std::max(begin - request.num_tokens(), 0);
    s.spec_token_ids.assign(request.spec_token_ids.begin() + skip,
                            request.spec_token_ids.begin() + skip + num_spec);
    s.token_ids.insert(s.token_ids.end(), s.spec_token_ids.begin(), s.spec_token_ids.end());
  }
  s.group_block_ids.resize(static_cast<size_t>(kv_.num_groups()));
  for (int g = 0; g < kv_.num_groups(); ++g) {
    const auto block_ids = kv_.get_block_ids(s.request_id, g);
    s.group_block_ids[static_cast<size_t>(g)].assign(block_ids.begin(), block_ids.end());
  }
  s.samples_token = end >= request.num_tokens();
  // _update_after_schedule: computed tokens advance at schedule time. New drafts arrive before
  // the next step if a drafter runs.
  request.num_computed_tokens = end;
  request.num_scheduled_draft_tokens = static_cast<int>(s.spec_token_ids.size());
  request.spec_token_ids.clear();
  return s;
}

SchedulerOutput Scheduler::schedule(int running_limit) {
  VELLUM_CHECK(running_limit >= 1, ErrorCode::kInvalidArgument,
               "schedule(): running_limit must be at least 1, got {}", running_limit);
  SchedulerOutput out;
  int token_budget = config_.token_budget();
  std::vector<Planned> planned;
  std::vector<Request*> preempted;

  schedule_running(token_budget, running_limit, planned, preempted);
  if (preempted.empty()) schedule_swapped(token_budget, planned);
  if (preempted.empty() && swapped_.empty()) schedule_waiting(token_budget, planned);

  out.scheduled_requests.reserve(planned.size());
  for (const Planned& p : planned) {
    out.scheduled_requests.push_back(commit(p));
    out.total_num_scheduled_tokens += p.num_tokens;
  }
  VELLUM_ASSERT(out.total_num_scheduled_tokens <= config_.token_budget());
  VELLUM_ASSERT(num_running_seats() <= config_.max_num_seqs);

  out.blocks_to_swap_out = std::move(pending_swap_out_);
  pending_swap_out_.clear();
  out.blocks_to_swap_in = std::move(swap_in_moves_);
  swap_in_moves_.clear();
  out.blocks_to_copy = kv_.take_copy_on_writes();
  out.preempted_req_ids = std::move(pending_preempted_ids_);
  pending_preempted_ids_.clear();
  out.finished_req_ids = std::move(finished_req_ids_);
  finished_req_ids_.clear();
  return out;
}

std::shared_ptr<Request> Scheduler::shared(const Request& request) const {
  auto it = requests_.find(request.request_id());
  VELLUM_ASSERT(it != requests_.end());
  return it->second;
}

}  // namespace vellum::core

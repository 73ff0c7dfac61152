// Scheduler: the update half of a step (update_from_output), finishing requests, cache reset,
// queries, stats and invariants.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"
#include "core/scheduler/scheduler.h"
#include "core/stop_checker.h"

namespace vellum::core {

void Scheduler::remove_from_queue(Request& request, RequestStatus queue_status) {
  switch (queue_status) {
    case RequestStatus::kRunning: {
      auto it = std::find(running_.begin(), running_.end(), &request);
      VELLUM_ASSERT(it != running_.end());
      running_.erase(it);
      break;
    }
    case RequestStatus::kSwapped:
      VELLUM_ASSERT(swapped_.remove(&request));
      break;
    default:  // kWaiting, kWaitingForRemoteKvs, kPreempted
      VELLUM_ASSERT(waiting_.remove(&request));
      break;
  }
}

void Scheduler::free_request(Request& request) {
  VELLUM_ASSERT(is_finished(request.status));
  const std::string id = request.request_id();  // copy: the map entry may own the request
  finished_req_ids_.push_back(id);
  kv_.free(id);  // false for a request that never got blocks: fine
  requests_.erase(id);
}

void Scheduler::finish_requests(std::span<const std::string> request_ids,
                                RequestStatus finished_status) {
  VELLUM_CHECK(is_finished(finished_status), ErrorCode::kInvalidArgument,
               "finish_requests needs a finished status (e.g. kFinishedAborted), got {}",
               static_cast<int>(finished_status));
  for (const std::string& id : request_ids) finish_request(id, finished_status);
}

void Scheduler::finish_request(std::string_view request_id, RequestStatus finished_status) {
  VELLUM_CHECK(is_finished(finished_status), ErrorCode::kInvalidArgument,
               "finish_request needs a finished status (e.g. kFinishedAborted), got {}",
               static_cast<int>(finished_status));
  auto it = requests_.find(request_id);
  if (it == requests_.end() || is_finished(it->second->status)) return;
  Request& request = *it->second;
  remove_from_queue(request, request.status);
  request.status = finished_status;
  free_request(request);
}

std::vector<EngineCoreOutput> Scheduler::update_from_output(
    const SchedulerOutput& scheduler_output, const ModelRunnerOutput& runner_output) {
  VELLUM_CHECK(runner_output.req_ids.size() == runner_output.sampled_token_ids.size(),
               ErrorCode::kInvalidArgument,
               "ModelRunnerOutput has {} req_ids but {} sampled lists; they must be parallel",
               runner_output.req_ids.size(), runner_output.sampled_token_ids.size());
  std::unordered_map<std::string_view, size_t> index_of;
  index_of.reserve(runner_output.req_ids.size());
  for (size_t i = 0; i < runner_output.req_ids.size(); ++i) {
    index_of.emplace(runner_output.req_ids[i], i);
  }

  std::vector<EngineCoreOutput> outputs = std::move(pending_outputs_);
  pending_outputs_.clear();
  std::vector<std::shared_ptr<Request>> stopped;
  std::vector<RequestStatus> stopped_queue;  // the queue each stopped request is in

  for (const ScheduledRequest& s : scheduler_output.scheduled_requests) {
    auto req_it = requests_.find(s.request_id);
    // Finished meanwhile (e.g. aborted while the model ran): nothing to apply.
    if (req_it == requests_.end() || is_finished(req_it->second->status)) continue;
    Request& request = *req_it->second;

    std::span<const TokenId> generated;
    if (auto idx = index_of.find(s.request_id); idx != index_of.end()) {
      generated = runner_output.sampled_token_ids[idx->second];
    }
    VELLUM_CHECK(generated.empty() || s.samples_token, ErrorCode::kInternal,
                 "runner sampled {} tokens for request {}, whose step was a partial prefill "
                 "chunk; only requests with samples_token get tokens",
                 generated.size(), s.request_id);
    VELLUM_CHECK(!generated.empty() || !s.samples_token, ErrorCode::kInternal,
                 "runner sampled no token for request {}, whose prompt was finished this step",
                 s.request_id);

    request.num_scheduled_draft_tokens = 0;
    if (!s.spec_token_ids.empty() && !generated.empty()) {
      const int num_accepted = static_cast<int>(generated.size()) - 1;
      const int num_rejected = static_cast<int>(s.spec_token_ids.size()) - num_accepted;
      VELLUM_CHECK(num_rejected >= 0, ErrorCode::kInternal,
                   "runner returned {} tokens for request {} with only {} draft tokens",
                   generated.size(), s.request_id, s.spec_token_ids.size());
      if (request.num_computed_tokens > 0) request.num_computed_tokens -= num_rejected;
      // Only the rejected drafts' KV lies past the accepted tokens; give those blocks back.
      if (num_rejected > 0) kv_.trim_blocks(request.request_id(), request.num_computed_tokens);
    }

    const RequestStatus queue_status = request.status;
    bool is_stopped = false;
    size_t num_kept = 0;
    for (TokenId token : generated) {
      request.append_output_token_ids(token);
      ++num_kept;
      if (check_stop(request, config_.max_model_len)) {
        is_stopped = true;
        break;  // tokens after a stop are dropped
      }
    }
    if (num_kept == 0 && !is_stopped) continue;

    EngineCoreOutput out;
    out.request_id = s.request_id;
    out.new_token_ids.assign(generated.begin(), generated.begin() + static_cast<ptrdiff_t>(num_kept));
    out.status = request.status;
    out.stop_reason = request.stop_reason;
    out.num_cached_tokens = std::max(request.num_cached_tokens, 0);
    out.num_prompt_tokens = request.num_prompt_tokens();
    outputs.push_back(std::move(out));
    if (is_stopped) {
      stopped.push_back(req_it->second);
      stopped_queue.push_back(queue_status);
    }
  }

  // Stopped requests leave running_ (or waiting_/swapped_ if preempted while their step ran).
  std::unordered_set<const Request*> stopped_running;
  for (size_t i = 0; i < stopped.size(); ++i) {
    if (stopped_queue[i] == RequestStatus::kRunning) {
      stopped_running.insert(stopped[i].get());
    } else {
      remove_from_queue(*stopped[i], stopped_queue[i]);
    }
  }
  if (!stopped_running.empty()) {
    std::erase_if(running_, [&](const Request* r) { return stopped_running.contains(r); });
  }
  for (const auto& request : stopped) free_request(*request);
  VELLUM_DEBUG_ONLY(check_invariants());
  return outputs;
}

void Scheduler::set_draft_token_ids(std::string_view request_id,
                                    std::vector<TokenId> draft_token_ids) {
  auto it = requests_.find(request_id);
  VELLUM_CHECK(it != requests_.end() && it->second->status == RequestStatus::kRunning,
               ErrorCode::kInvalidArgument,
               "set_draft_token_ids: request {} is not running; only running requests verify "
               "drafts",
               request_id);
  Request& request = *it->second;
  VELLUM_CHECK(draft_token_ids.empty() || request.num_computed_tokens == request.num_tokens() - 1,
               ErrorCode::kInvalidArgument,
               "set_draft_token_ids: request {} has computed {} of its {} tokens; drafts are only "
               "for requests in their decode phase (all but the last token computed)",
               request_id, request.num_computed_tokens, request.num_tokens());
  request.spec_token_ids = std::move(draft_token_ids);
}

bool Scheduler::reset_prefix_cache(bool reset_running_requests) {
  if (reset_running_requests) {
    // Tail first, each prepended: waiting_ ends with them in their running order.
    while (!running_.empty()) {
      Request* request = running_.back();
      running_.pop_back();
      preempt(*request, /*force_recompute=*/true);
    }
  }
  return kv_.reset_prefix_cache();
}

int Scheduler::num_unfinished_requests() const {
  return static_cast<int>(running_.size()) + waiting_.size() + swapped_.size();
}

namespace {
std::vector<std::string> ids_of(const std::vector<Request*>& requests) {
  std::vector<std::string> ids;
  ids.reserve(requests.size());
  for (const Request* r : requests) ids.push_back(r->request_id());
  return ids;
}
}  // namespace

std::vector<std::string> Scheduler::running_request_ids() const { return ids_of(running_); }
std::vector<std::string> Scheduler::waiting_request_ids() const {
  return ids_of(waiting_.requests());
}
std::vector<std::string> Scheduler::swapped_request_ids() const {
  return ids_of(swapped_.requests());
}

const Request* Scheduler::get_request(std::string_view request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

SchedulerStats Scheduler::make_stats() {
  SchedulerStats stats;
  stats.num_running_reqs = num_running();
  stats.num_swapped_reqs = num_swapped();
  stats.num_waiting_reqs = num_waiting() + num_swapped();
  stats.kv_cache_usage = kv_.usage();
  stats.num_preempted_reqs = num_preemptions_since_stats_;
  num_preemptions_since_stats_ = 0;
  stats.prefix_cache_stats = kv_.make_prefix_cache_stats();
  return stats;
}

void Scheduler::check_invariants() const {
  auto fail_unless = [](bool ok, const std::string& what) {
    VELLUM_CHECK(ok, ErrorCode::kInternal, "scheduler invariant: {}", what);
  };
  std::unordered_set<const Request*> seen;
  fail_unless(num_running_seats() <= config_.max_num_seqs,
              fmt::format("{} running requests take {} seats > max_num_seqs {}", running_.size(),
                          num_running_seats(), config_.max_num_seqs));
  // A lockstep group lives in one queue: it is served, preempted and resumed whole.
  std::unordered_map<std::string_view, RequestStatus> lockstep_queue;
  for (const auto& [id, r] : requests_) {
    if (!r->params().lockstep_group) continue;
    const RequestStatus queue =
        r->status == RequestStatus::kWaiting ? RequestStatus::kPreempted : r->status;
    auto [it, inserted] = lockstep_queue.emplace(r->group_id(), queue);
    fail_unless(inserted || it->second == queue,
                "lockstep group " + r->group_id() + " is split across queues");
  }
  for (const Request* r : running_) {
    const std::string& id = r->request_id();
    fail_unless(seen.insert(r).second, "request " + id + " queued twice");
    fail_unless(r->status == RequestStatus::kRunning, "running request " + id + " not kRunning");
    fail_unless(kv_.is_resident(id), "running request " + id + " holds no device blocks");
    fail_unless(r->num_computed_tokens <= r->num_tokens_with_spec() + r->num_scheduled_draft_tokens,
                "request " + id + " computed more tokens than it has");
  }
  for (const Request* r : waiting_.requests()) {
    const std::string& id = r->request_id();
    fail_unless(seen.insert(r).second, "request " + id + " queued twice");
    fail_unless(r->status == RequestStatus::kWaiting || r->status == RequestStatus::kPreempted,
                "waiting request " + id + " has a non-waiting status");
    fail_unless(r->num_computed_tokens == 0, "waiting request " + id + " has computed tokens");
    fail_unless(!kv_.is_resident(id) && !kv_.is_swapped(id),
                "waiting request " + id + " still holds KV blocks");
  }
  for (const Request* r : swapped_.requests()) {
    const std::string& id = r->request_id();
    fail_unless(seen.insert(r).second, "request " + id + " queued twice");
    fail_unless(r->status == RequestStatus::kSwapped, "swapped request " + id + " not kSwapped");
    fail_unless(kv_.is_swapped(id), "swapped request " + id + " holds no host blocks");
    fail_unless(r->num_computed_tokens <= r->num_tokens(),
                "request " + id + " computed more tokens than it has");
  }
  fail_unless(seen.size() == requests_.size(),
              fmt::format("{} requests known but {} queued", requests_.size(), seen.size()));
  for (const auto& [id, r] : requests_) {
    fail_unless(seen.contains(r.get()), "request " + id + " is in no queue");
  }
  fail_unless(kv_.num_resident_requests() == static_cast<int>(running_.size()),
              fmt::format("{} requests hold device blocks but {} are running",
                          kv_.num_resident_requests(), running_.size()));
  kv_.check_invariants();
}

void Scheduler::fork_request(std::string_view parent_id, std::shared_ptr<Request> child) {
  VELLUM_CHECK(child != nullptr, ErrorCode::kInvalidArgument, "fork_request: null child");
  auto it = requests_.find(parent_id);
  VELLUM_CHECK(it != requests_.end() && it->second->status == RequestStatus::kRunning,
               ErrorCode::kInvalidArgument,
               "fork_request: parent {} is not running; fork only a running request", parent_id);
  const Request& parent = *it->second;
  const std::string& id = child->request_id();
  VELLUM_CHECK(!requests_.contains(id), ErrorCode::kInvalidArgument,
               "fork_request: child id {} is already in the scheduler; ids must be unique", id);
  VELLUM_CHECK(child->status == RequestStatus::kWaiting && child->num_computed_tokens == 0 &&
                   child->num_tokens() >= parent.num_computed_tokens,
               ErrorCode::kInvalidArgument,
               "fork_request: child {} must be new and hold at least the parent's {} computed "
               "tokens (has {})",
               id, parent.num_computed_tokens, child->num_tokens());
  VELLUM_CHECK(child->group_id() == parent.group_id(), ErrorCode::kInvalidArgument,
               "fork_request: child {} must carry its parent's seq_group_id '{}'", id,
               parent.group_id());
  int num_members = 1;
  for (const auto& [other_id, r] : requests_) num_members += r->group_id() == parent.group_id();
  VELLUM_CHECK(num_members <= parent.params().max_num_seqs_in_group, ErrorCode::kInvalidArgument,
               "fork_request: group {} would have {} sequences but reserved only {} "
               "(max_num_seqs_in_group)",
               parent.group_id(), num_members, parent.params().max_num_seqs_in_group);
  kv_.fork(parent_id, id);
  child->status = RequestStatus::kRunning;
  child->num_computed_tokens = parent.num_computed_tokens;
  child->num_cached_tokens = parent.num_cached_tokens;
  running_.push_back(child.get());
  requests_.emplace(id, std::move(child));
  VELLUM_DEBUG_ONLY(check_invariants());
}

}  // namespace vellum::core

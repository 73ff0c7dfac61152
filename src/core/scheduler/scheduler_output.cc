#include "core/scheduler/scheduler_output.h"

#include <algorithm>

namespace vellum::core {

const ScheduledRequest* SchedulerOutput::find(std::string_view request_id) const {
  for (const ScheduledRequest& s : scheduled_requests) {
    if (s.request_id == request_id) return &s;
  }
  return nullptr;
}

int SchedulerOutput::num_scheduled_tokens(std::string_view request_id) const {
  const ScheduledRequest* s = find(request_id);
  return s != nullptr ? s->num_scheduled_tokens : 0;
}

int SchedulerOutput::num_new_requests() const {
  return static_cast<int>(std::count_if(scheduled_requests.begin(), scheduled_requests.end(),
                                        [](const auto& s) { return s.kind == ScheduledKind::kNew; }));
}

int SchedulerOutput::num_cached_requests() const {
  return static_cast<int>(scheduled_requests.size()) - num_new_requests();
}

std::vector<std::string> SchedulerOutput::resumed_req_ids() const {
  std::vector<std::string> ids;
  for (const ScheduledRequest& s : scheduled_requests) {
    if (s.kind == ScheduledKind::kResumed) ids.push_back(s.request_id);
  }
  return ids;
}

std::vector<std::string> SchedulerOutput::scheduled_req_ids() const {
  std::vector<std::string> ids;
  ids.reserve(scheduled_requests.size());
  for (const ScheduledRequest& s : scheduled_requests) ids.push_back(s.request_id);
  return ids;
}

}  // namespace vellum::core

#include "core/scheduler/request_queue.h"

#include <algorithm>
#include <tuple>

#include "common/check.h"

namespace vellum::core {

bool RequestQueue::PriorityLess::operator()(const Request* a, const Request* b) const {
  return std::forward_as_tuple(a->params().priority, a->params().arrival_time, a->request_id()) <
         std::forward_as_tuple(b->params().priority, b->params().arrival_time, b->request_id());
}

void RequestQueue::add(Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    fcfs_.push_back(request);
  } else {
    const bool inserted = priority_.insert(request).second;
    VELLUM_CHECK(inserted, ErrorCode::kInternal, "request {} is already queued",
                 request->request_id());
  }
}

void RequestQueue::prepend(Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    fcfs_.push_front(request);
  } else {
    add(request);
  }
}

Request* RequestQueue::peek() const {
  VELLUM_ASSERT(!empty());
  return policy_ == SchedulingPolicy::kFcfs ? fcfs_.front() : *priority_.begin();
}

Request* RequestQueue::pop() {
  Request* request = peek();
  if (policy_ == SchedulingPolicy::kFcfs) {
    fcfs_.pop_front();
  } else {
    priority_.erase(priority_.begin());
  }
  return request;
}

bool RequestQueue::remove(const Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    auto it = std::find(fcfs_.begin(), fcfs_.end(), request);
    if (it == fcfs_.end()) return false;
    fcfs_.erase(it);
    return true;
  }
  return priority_.erase(const_cast<Request*>(request)) > 0;
}

int RequestQueue::size() const {
  return static_cast<int>(policy_ == SchedulingPolicy::kFcfs ? fcfs_.size() : priority_.size());
}

std::vector<Request*> RequestQueue::requests() const {
  if (policy_ == SchedulingPolicy::kFcfs) return {fcfs_.begin(), fcfs_.end()};
  return {priority_.begin(), priority_.end()};
}

}  // namespace vellum::core

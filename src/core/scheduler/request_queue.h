// The waiting (and swapped) queue of the scheduler (spec §2.3, vllm/v1/core/sched/request_queue.py).
//
// FCFS: a deque; add() appends, prepend() puts a preempted request back at the head.
// Priority: ordered by (priority, arrival_time, request_id), lowest first; prepend() == add().
// Iteration (requests()) yields the order in which peek()/pop() would serve them.
//
// Holds non-owning pointers: the Scheduler owns the Requests and removes a request from its queue
// before dropping it. Not thread-safe.
#pragma once

#include <deque>
#include <set>
#include <vector>

#include "core/request.h"
#include "core/scheduler/scheduler_config.h"

namespace vellum::core {

class RequestQueue {
 public:
  explicit RequestQueue(SchedulingPolicy policy) : policy_(policy) {}

  void add(Request* request);
  void prepend(Request* request);
  Request* peek() const;  // the next request to serve; the queue must not be empty
  Request* pop();
  // Removes the request if present; returns whether it was.
  bool remove(const Request* request);

  bool empty() const { return size() == 0; }
  int size() const;
  // Snapshot in serving order (O(n)).
  std::vector<Request*> requests() const;

 private:
  // Orders by (priority, arrival_time, request_id) like vLLM's Request.__lt__.
  struct PriorityLess {
    bool operator()(const Request* a, const Request* b) const;
  };

  SchedulingPolicy policy_;
  std::deque<Request*> fcfs_;                  // policy kFcfs
  std::set<Request*, PriorityLess> priority_;  // policy kPriority
};

}  // namespace vellum::core

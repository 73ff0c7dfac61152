#include "kernels/threads.h"

#include <omp.h>
#include <sched.h>

#include <exception>

namespace vellum::kernels::threads {
namespace {

inline void cpu_relax() { __builtin_ia32_pause(); }

// A hand-off normally arrives within microseconds. Waits longer than this many pauses (~20 ns
// each on the machines measured, so ~160 us) are a serial stretch on thread 0 or a wait on
// another rank: workers then sleep on a futex and thread 0 yields its core, so that an
// oversubscribed machine's other processes are not starved.
constexpr int kSpins = 1 << 13;

struct Team;
// The team whose thread 0 is the calling thread, while it runs the team's scope (not while it
// runs its own share of a hand-off).
thread_local Team* t_team = nullptr;

// Thread 0 publishes (body, context) and bumps `epoch`; the other threads run it and count
// `pending` down. A new hand-off is only published after `pending` reached zero, so the fields
// are never rewritten while a worker reads them. A worker that sleeps announces it in
// `sleepers` before its last look at `epoch` (both sequentially consistent), so a bump either
// is seen by that look or sees the sleeper and wakes it.
struct Team {
  int size = 1;
  detail::Body body = nullptr;
  void* context = nullptr;
  bool stop = false;
  alignas(64) std::atomic<uint32_t> epoch{0};
  alignas(64) std::atomic<int> sleepers{0};
  alignas(64) std::atomic<int> pending{0};

  void dispatch(detail::Body b, void* c) {
    body = b;
    context = c;
    pending.store(size - 1, std::memory_order_relaxed);
    epoch.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) epoch.notify_all();
    std::exception_ptr error;
    if (!stop) {
      // Thread 0's share runs like a worker's: a parallel() call inside it runs inline.
      t_team = nullptr;
      try {
        b(c, 0, size);
      } catch (...) {
        error = std::current_exception();  // rethrown once the workers are done with `c`
      }
      t_team = this;
    }
    for (int spins = 0; pending.load(std::memory_order_acquire) != 0;) {
      if (spins < kSpins) {
        ++spins;
        cpu_relax();
      } else {
        sched_yield();
      }
    }
    if (error) std::rethrow_exception(error);
  }

  // Returns the epoch after `seen`.
  uint32_t await(uint32_t seen) {
    for (int spins = 0;;) {
      const uint32_t now = epoch.load(std::memory_order_acquire);
      if (now != seen) return now;
      if (spins < kSpins) {
        ++spins;
        cpu_relax();
        continue;
      }
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (epoch.load(std::memory_order_seq_cst) == seen) {
        epoch.wait(seen, std::memory_order_seq_cst);
      }
      sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  void work(int thread) {
    for (uint32_t seen = 0;;) {
      seen = await(seen);
      const bool last = stop;
      if (!last) body(context, thread, size);
      pending.fetch_sub(1, std::memory_order_release);
      if (last) return;
    }
  }
};


}  // namespace

int max_threads() { return t_team != nullptr ? t_team->size : omp_get_max_threads(); }

bool in_team() { return t_team != nullptr; }

namespace detail {

void run_parallel(Body body, void* context) {
  if (Team* team = t_team) {
    team->dispatch(body, context);
    return;
  }
  // A team's worker or another region's thread (no nesting), or one thread: no region.
  if (omp_in_parallel() || omp_get_max_threads() < 2) {
    body(context, 0, 1);
    return;
  }
#pragma omp parallel
  body(context, omp_get_thread_num(), omp_get_num_threads());
}

void run_as_team(Body body, void* context) {
  if (t_team != nullptr || omp_in_parallel() || omp_get_max_threads() < 2) {
    body(context, 0, 1);
    return;
  }
  Team team;
  std::exception_ptr error;
#pragma omp parallel
  {
    const int thread = omp_get_thread_num();
    if (thread == 0) {
      // Workers read `size` only after an epoch bump, which follows this store.
      team.size = omp_get_num_threads();
      if (team.size > 1) t_team = &team;
      try {
        body(context, 0, 1);
      } catch (...) {
        error = std::current_exception();
      }
      t_team = nullptr;
      team.stop = true;
      team.dispatch(nullptr, nullptr);  // releases the workers
    } else {
      team.work(thread);
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace detail
}  // namespace vellum::kernels::threads

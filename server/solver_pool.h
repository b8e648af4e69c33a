// The solver pool: a fixed set of worker threads fed by a bounded queue.
// gRPC's callback threads never solve; they hand work here. A full queue
// refuses new work (the caller answers RESOURCE_EXHAUSTED) instead of
// growing. Each worker owns its scratch (SolveScratch), so solves on
// different workers share nothing mutable.
#ifndef REACH_SERVER_SOLVER_POOL_H_
#define REACH_SERVER_SOLVER_POOL_H_

#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/solve_call.h"

namespace reach {

class SolverPool {
 public:
  using Task = absl::AnyInvocable<void(SolveScratch&)>;

  // Called with no lock held: when a task is queued (by the submitting
  // thread) and when it starts (by the worker), with how long it waited and
  // how many tasks are queued.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void TaskQueued(int queue_depth) = 0;
    virtual void TaskStarted(absl::Duration waited, int queue_depth) = 0;
  };

  // threads >= 1, queue_capacity >= 1; `observer` may be null and must
  // outlive the pool.
  SolverPool(int threads, int queue_capacity, Observer* observer = nullptr);
  // Runs every queued task, then joins the workers.
  ~SolverPool();

  // Queues `task`; false (and `task` untouched) when the queue is full or
  // the pool is stopping.
  bool TrySubmit(Task& task);
  // Queues all of `tasks` or none of them (false: all untouched).
  bool TrySubmitAll(absl::Span<Task> tasks);
  // Stops accepting, runs what is queued, joins the workers. Idempotent.
  void Shutdown();

  int queue_depth() const;
  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  struct Item {
    Task task;
    absl::Time enqueued;
  };
  void Work();

  const int capacity_;
  Observer* const observer_;
  mutable absl::Mutex mu_;
  std::vector<Item> ring_ ABSL_GUARDED_BY(mu_);  // capacity_ slots.
  int head_ ABSL_GUARDED_BY(mu_) = 0;
  int size_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace reach

#endif  // REACH_SERVER_SOLVER_POOL_H_

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

  // Called with the pool's lock held, so the depths arrive in order and the
  // last one published is the queue's (keep them cheap): when tasks are
  // queued (by the submitting thread) and when one starts (by the worker),
  // with how long it waited and how many tasks are queued.
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

  // Which queue a task waits in. Workers take from the two in turn when
  // both hold tasks, so however many stream frames are queued, a call waits
  // for at most one of them per thread (and streams are never starved by
  // calls). Within a lane, first in first out.
  enum class Lane : int {
    kCall = 0,    // Unary calls and batches.
    kStream = 1,  // Stream frames: a stream queues one task at a time.
  };

  // What Submit did with the tasks.
  enum class Admission {
    kQueued,
    kQueueFull,    // Fewer free slots than tasks.
    kWaitTooLong,  // EstimatedWait() exceeds the caller's max_wait.
    kStopping,     // Shutdown has begun.
  };

  // Queues all of `tasks` or none of them (refused: all untouched), in
  // `lane`. Work that would wait longer than `max_wait` for a thread is
  // refused at the door rather than left to time out in the queue.
  Admission Submit(absl::Span<Task> tasks, absl::Duration max_wait,
                   Lane lane = Lane::kCall);
  // Submit with no wait bound; true when queued.
  bool TrySubmit(Task& task);
  bool TrySubmitAll(absl::Span<Task> tasks);

  // How long a task queued now in `lane` would wait for a thread: the
  // tasks taken before it (its lane's queued tasks, and as many of the
  // other lane's, taken in turn) times their lane's mean run time (a moving
  // average over about the last 32 tasks), over the threads. Zero when
  // both queues are empty.
  absl::Duration EstimatedWait(Lane lane = Lane::kCall) const;
  // Stops accepting, runs what is queued, joins the workers. Idempotent.
  void Shutdown();

  int queue_depth() const;
  int threads() const { return threads_; }

 private:
  struct Item {
    Task task;
    absl::Time enqueued;
  };
  // A lane's queue: a ring of capacity_ slots.
  struct Queue {
    std::vector<Item> ring;
    int head = 0;
    int size = 0;
    double mean_task_seconds = 0.0;
  };
  void Work();
  absl::Duration EstimatedWaitLocked(Lane lane) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int QueuedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return lanes_[0].size + lanes_[1].size;
  }

  const int threads_;
  const int capacity_;  // Both lanes' tasks together.
  Observer* const observer_;
  mutable absl::Mutex mu_;
  Queue lanes_[2] ABSL_GUARDED_BY(mu_);  // By Lane.
  int next_lane_ ABSL_GUARDED_BY(mu_) = 0;  // Taken next when both wait.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace reach

#endif  // REACH_SERVER_SOLVER_POOL_H_

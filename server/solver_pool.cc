#include "server/solver_pool.h"

#include <algorithm>
#include <utility>

namespace reach {
namespace {

// Weight of the newest task in the moving average of task run times.
constexpr double kMeanWeight = 1.0 / 32.0;

}  // namespace

SolverPool::SolverPool(int threads, int queue_capacity, Observer* observer)
    : threads_(threads), capacity_(queue_capacity), observer_(observer) {
  for (Queue& lane : lanes_) lane.ring.resize(capacity_);
  workers_.reserve(threads);
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

SolverPool::~SolverPool() { Shutdown(); }

bool SolverPool::TrySubmit(Task& task) {
  return TrySubmitAll(absl::MakeSpan(&task, 1));
}

bool SolverPool::TrySubmitAll(absl::Span<Task> tasks) {
  return Submit(tasks, absl::InfiniteDuration()) == Admission::kQueued;
}

SolverPool::Admission SolverPool::Submit(absl::Span<Task> tasks,
                                         absl::Duration max_wait, Lane lane) {
  const absl::Time now = absl::Now();
  const int n = static_cast<int>(tasks.size());
  absl::MutexLock lock(&mu_);
  if (stopping_) return Admission::kStopping;
  if (QueuedLocked() + n > capacity_) return Admission::kQueueFull;
  if (EstimatedWaitLocked(lane) > max_wait) return Admission::kWaitTooLong;
  Queue& queue = lanes_[static_cast<int>(lane)];
  for (Task& task : tasks) {
    Item& slot = queue.ring[(queue.head + queue.size) % capacity_];
    slot.task = std::move(task);
    slot.enqueued = now;
    ++queue.size;
  }
  if (observer_ != nullptr) observer_->TaskQueued(QueuedLocked());
  return Admission::kQueued;
}

void SolverPool::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

int SolverPool::queue_depth() const {
  absl::MutexLock lock(&mu_);
  return QueuedLocked();
}

absl::Duration SolverPool::EstimatedWait(Lane lane) const {
  absl::MutexLock lock(&mu_);
  return EstimatedWaitLocked(lane);
}

absl::Duration SolverPool::EstimatedWaitLocked(Lane lane) const {
  const Queue& own = lanes_[static_cast<int>(lane)];
  const Queue& other = lanes_[1 - static_cast<int>(lane)];
  // Taken in turn: as many of the other lane's tasks as of this one's (and
  // one more, when it is the other lane's turn).
  const int others = std::min(other.size, own.size + 1);
  return absl::Seconds((own.mean_task_seconds * own.size +
                        other.mean_task_seconds * others) /
                       threads_);
}

void SolverPool::Work() {
  SolveScratch scratch;
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return QueuedLocked() > 0 || stopping_;
  };
  double last_task_seconds = -1.0;  // None yet.
  int last_lane = 0;
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_, absl::Condition(&ready));
      if (last_task_seconds >= 0.0) {
        double& mean = lanes_[last_lane].mean_task_seconds;
        mean += kMeanWeight * (last_task_seconds - mean);
      }
      if (QueuedLocked() == 0) return;  // Stopping and drained.
      int lane = next_lane_;
      if (lanes_[lane].size == 0) lane = 1 - lane;
      next_lane_ = 1 - lane;
      Queue& queue = lanes_[lane];
      Item& item = queue.ring[queue.head];
      task = std::move(item.task);
      queue.head = (queue.head + 1) % capacity_;
      --queue.size;
      last_lane = lane;
      if (observer_ != nullptr) {
        observer_->TaskStarted(absl::Now() - item.enqueued, QueuedLocked());
      }
    }
    const absl::Time start = absl::Now();
    task(scratch);
    last_task_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  }
}

}  // namespace reach

#include "server/solver_pool.h"

#include <utility>

namespace reach {
namespace {

// Weight of the newest task in the moving average of task run times.
constexpr double kMeanWeight = 1.0 / 32.0;

}  // namespace

SolverPool::SolverPool(int threads, int queue_capacity, Observer* observer)
    : threads_(threads), capacity_(queue_capacity), observer_(observer) {
  ring_.resize(capacity_);
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
                                         absl::Duration max_wait) {
  const absl::Time now = absl::Now();
  const int n = static_cast<int>(tasks.size());
  absl::MutexLock lock(&mu_);
  if (stopping_) return Admission::kStopping;
  if (size_ + n > capacity_) return Admission::kQueueFull;
  if (EstimatedWaitLocked() > max_wait) return Admission::kWaitTooLong;
  for (Task& task : tasks) {
    Item& slot = ring_[(head_ + size_) % capacity_];
    slot.task = std::move(task);
    slot.enqueued = now;
    ++size_;
  }
  if (observer_ != nullptr) observer_->TaskQueued(size_);
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
  return size_;
}

absl::Duration SolverPool::EstimatedWait() const {
  absl::MutexLock lock(&mu_);
  return EstimatedWaitLocked();
}

absl::Duration SolverPool::EstimatedWaitLocked() const {
  return absl::Seconds(mean_task_seconds_ * size_ /
                       threads_);
}

void SolverPool::Work() {
  SolveScratch scratch;
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return size_ > 0 || stopping_;
  };
  double last_task_seconds = -1.0;  // None yet.
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_, absl::Condition(&ready));
      if (last_task_seconds >= 0.0) {
        mean_task_seconds_ +=
            kMeanWeight * (last_task_seconds - mean_task_seconds_);
      }
      if (size_ == 0) return;  // Stopping and drained.
      Item& item = ring_[head_];
      task = std::move(item.task);
      head_ = (head_ + 1) % capacity_;
      --size_;
      if (observer_ != nullptr) {
        observer_->TaskStarted(absl::Now() - item.enqueued, size_);
      }
    }
    const absl::Time start = absl::Now();
    task(scratch);
    last_task_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  }
}

}  // namespace reach

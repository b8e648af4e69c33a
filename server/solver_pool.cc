#include "server/solver_pool.h"

#include <utility>

namespace reach {

SolverPool::SolverPool(int threads, int queue_capacity, Observer* observer)
    : capacity_(queue_capacity), observer_(observer) {
  ring_.resize(capacity_);
  workers_.reserve(threads);
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

SolverPool::~SolverPool() { Shutdown(); }

bool SolverPool::TrySubmit(Task& task) {
  return TrySubmitAll(absl::MakeSpan(&task, 1));
}

bool SolverPool::TrySubmitAll(absl::Span<Task> tasks) {
  const absl::Time now = absl::Now();
  const int n = static_cast<int>(tasks.size());
  int depth;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || size_ + n > capacity_) return false;
    for (Task& task : tasks) {
      Item& slot = ring_[(head_ + size_) % capacity_];
      slot.task = std::move(task);
      slot.enqueued = now;
      ++size_;
    }
    depth = size_;
  }
  if (observer_ != nullptr) observer_->TaskQueued(depth);
  return true;
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

void SolverPool::Work() {
  SolveScratch scratch;
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return size_ > 0 || stopping_;
  };
  while (true) {
    Task task;
    absl::Time enqueued;
    int depth;
    {
      absl::MutexLock lock(&mu_, absl::Condition(&ready));
      if (size_ == 0) return;  // Stopping and drained.
      Item& item = ring_[head_];
      task = std::move(item.task);
      enqueued = item.enqueued;
      head_ = (head_ + 1) % capacity_;
      --size_;
      depth = size_;
    }
    if (observer_ != nullptr) observer_->TaskStarted(absl::Now() - enqueued, depth);
    task(scratch);
  }
}

}  // namespace reach

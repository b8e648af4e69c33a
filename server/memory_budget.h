// The server's byte budget for what it buffers on behalf of calls: queued
// requests, stream frames read ahead and answers not yet sent, batch and
// solve outputs. A call charges its bytes before it holds them and gives
// them back when it lets go; a charge that does not fit is refused (the
// caller answers RESOURCE_EXHAUSTED, or a stream stops reading), so the
// memory calls hold stays under the budget however many arrive.
#ifndef REACH_SERVER_MEMORY_BUDGET_H_
#define REACH_SERVER_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <utility>

#include "server/memory.h"

namespace reach {

class MemoryBudget {
 public:
  // limit_bytes <= 0: unlimited (every charge fits; usage is still counted).
  // With a `parent` (a caller's share of the server's budget), a charge
  // must fit both, and is charged to both.
  explicit MemoryBudget(int64_t limit_bytes, MemoryBudget* parent = nullptr)
      : limit_(limit_bytes), parent_(parent) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Charges `bytes` (>= 0) when they fit under the limit; false (nothing
  // charged) otherwise.
  bool TryCharge(int64_t bytes) {
    int64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (limit_ > 0 && used + bytes > limit_) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes,
                                          std::memory_order_relaxed));
    if (parent_ != nullptr && !parent_->TryCharge(bytes)) {
      used_.fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  // Charges `bytes` whether or not they fit: for memory already owed (an
  // answer a stream must send); the next TryCharge sees it.
  void Charge(int64_t bytes) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
    if (parent_ != nullptr) parent_->Charge(bytes);
  }
  void Release(int64_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    if (parent_ != nullptr) {
      parent_->Release(bytes);
    } else {
      NoteReleased(bytes);
    }
  }

  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }
  const MemoryBudget* parent() const { return parent_; }

 private:
  const int64_t limit_;
  MemoryBudget* const parent_;
  std::atomic<int64_t> used_{0};
};

// A charge on a MemoryBudget, given back when destroyed. Move-only.
class BudgetCharge {
 public:
  BudgetCharge() = default;
  BudgetCharge(BudgetCharge&& other) noexcept { *this = std::move(other); }
  BudgetCharge& operator=(BudgetCharge&& other) noexcept {
    if (this != &other) {
      Reset();
      budget_ = std::exchange(other.budget_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~BudgetCharge() { Reset(); }

  // Adds `bytes` to this charge on `budget` (the same budget every time);
  // false when they do not fit (the charge is unchanged).
  bool TryAdd(MemoryBudget* budget, int64_t bytes) {
    if (!budget->TryCharge(bytes)) return false;
    budget_ = budget;
    bytes_ += bytes;
    return true;
  }
  // Adds `bytes` whether or not they fit (MemoryBudget::Charge).
  void Add(MemoryBudget* budget, int64_t bytes) {
    budget->Charge(bytes);
    budget_ = budget;
    bytes_ += bytes;
  }
  // Gives back `bytes` of this charge (at most what it holds).
  void Shrink(int64_t bytes) {
    if (bytes > bytes_) bytes = bytes_;
    if (budget_ != nullptr) budget_->Release(bytes);
    bytes_ -= bytes;
  }
  void Reset() { Shrink(bytes_); }
  int64_t bytes() const { return bytes_; }

 private:
  MemoryBudget* budget_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace reach

#endif  // REACH_SERVER_MEMORY_BUDGET_H_

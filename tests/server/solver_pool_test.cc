#include "server/solver_pool.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace reach {
namespace {

TEST(SolverPoolTest, RunsEveryTaskOnItsWorkers) {
  std::atomic<int> ran{0};
  {
    SolverPool pool(2, 100);
    for (int i = 0; i < 100; ++i) {
      SolverPool::Task task = [&ran](SolveScratch&) { ++ran; };
      ASSERT_TRUE(pool.TrySubmit(task));
    }
  }  // The destructor drains the queue.
  EXPECT_EQ(ran, 100);
}

TEST(SolverPoolTest, FullQueueRefusesAndLeavesTheTaskIntact) {
  SolverPool pool(1, 2);
  absl::Notification release;
  absl::Notification started;
  SolverPool::Task blocker = [&](SolveScratch&) {
    started.Notify();
    release.WaitForNotification();
  };
  ASSERT_TRUE(pool.TrySubmit(blocker));
  started.WaitForNotification();  // The worker is busy; the queue is empty.
  std::atomic<int> ran{0};
  SolverPool::Task a = [&](SolveScratch&) { ++ran; };
  SolverPool::Task b = [&](SolveScratch&) { ++ran; };
  SolverPool::Task c = [&](SolveScratch&) { ran += 100; };
  ASSERT_TRUE(pool.TrySubmit(a));
  ASSERT_TRUE(pool.TrySubmit(b));
  EXPECT_EQ(pool.queue_depth(), 2);
  EXPECT_FALSE(pool.TrySubmit(c));
  EXPECT_TRUE(static_cast<bool>(c));  // Not consumed.
  // All-or-nothing: two tasks do not fit into zero free slots.
  SolverPool::Task pair[2] = {[](SolveScratch&) {}, [](SolveScratch&) {}};
  EXPECT_FALSE(pool.TrySubmitAll(absl::MakeSpan(pair)));
  release.Notify();
  pool.Shutdown();
  EXPECT_EQ(ran, 2);
  EXPECT_FALSE(pool.TrySubmit(c));  // Stopped.
}

class CountingObserver : public SolverPool::Observer {
 public:
  void TaskQueued(int) override { ++queued; }
  void TaskStarted(absl::Duration waited, int) override {
    ++started;
    if (waited < absl::ZeroDuration()) ++negative;
  }
  std::atomic<int> queued{0}, started{0}, negative{0};
};

TEST(SolverPoolTest, ObserverSeesEveryTask) {
  CountingObserver observer;
  {
    SolverPool pool(2, 10, &observer);
    for (int i = 0; i < 10; ++i) {
      SolverPool::Task task = [](SolveScratch&) {};
      ASSERT_TRUE(pool.TrySubmit(task));
    }
  }
  EXPECT_EQ(observer.queued, 10);
  EXPECT_EQ(observer.started, 10);
  EXPECT_EQ(observer.negative, 0);
}

}  // namespace
}  // namespace reach

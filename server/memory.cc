#include "server/memory.h"

#include <malloc.h>
#include <pthread.h>

#include <csignal>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace reach {

bool RetainFreedMemory() {
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, 32 << 20) == 1;
  return mmap_ok && trim_ok;
}

namespace {

// The trimmer's state: `due` is raised by a large release and lowered by
// the thread once it has trimmed.
struct Trimmer {
  absl::Mutex mu;
  bool due ABSL_GUARDED_BY(mu) = false;
  int64_t trims ABSL_GUARDED_BY(mu) = 0;
};

std::atomic<Trimmer*> g_trimmer{nullptr};

void Trim(Trimmer* trimmer) {
  malloc_trim(0);
  absl::MutexLock lock(&trimmer->mu);
  ++trimmer->trims;
}

void TrimLoop(Trimmer* trimmer) {
  pthread_setname_np(pthread_self(), "reach-trim");
  for (;;) {
    {
      absl::MutexLock lock(&trimmer->mu);
      trimmer->mu.Await(absl::Condition(&trimmer->due));
    }
    // Let the call that released finish freeing what it held (its
    // messages go after its budget charge).
    absl::SleepFor(kTrimDelay);
    {
      absl::MutexLock lock(&trimmer->mu);
      trimmer->due = false;
    }
    Trim(trimmer);
    absl::SleepFor(kMinTrimInterval);
    // Once large calls stop coming, once more: what gRPC frees after the
    // last call is done (its transport buffers) goes back too.
    bool again;
    {
      absl::MutexLock lock(&trimmer->mu);
      again = trimmer->mu.AwaitWithTimeout(absl::Condition(&trimmer->due),
                                           kSettleTrimDelay);
    }
    if (!again) Trim(trimmer);
  }
}

}  // namespace

void StartMemoryTrimmer() {
  Trimmer* expected = nullptr;
  auto* trimmer = new Trimmer;  // Lives as long as the process.
  if (!g_trimmer.compare_exchange_strong(expected, trimmer)) {
    delete trimmer;
    return;
  }
  // The thread takes no signals: a process-directed SIGTERM or SIGHUP must
  // reach the thread that waits for it (main's sigwait), never this one,
  // whose default action would end the process. Threads inherit the mask
  // they are created with, so create it with every signal blocked.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  std::thread(TrimLoop, trimmer).detach();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void NoteReleased(int64_t bytes) {
  if (bytes < kTrimAfterBytes) return;
  Trimmer* trimmer = g_trimmer.load(std::memory_order_acquire);
  if (trimmer == nullptr) return;
  absl::MutexLock lock(&trimmer->mu);
  trimmer->due = true;
}

int64_t MemoryTrims() {
  Trimmer* trimmer = g_trimmer.load(std::memory_order_acquire);
  if (trimmer == nullptr) return 0;
  absl::MutexLock lock(&trimmer->mu);
  return trimmer->trims;
}

}  // namespace reach

// Process-wide allocator tuning for a server whose calls allocate and free
// large buffers (a 1000-character SolveBatch moves ~640 KB of messages).
#ifndef REACH_SERVER_MEMORY_H_
#define REACH_SERVER_MEMORY_H_

#include <cstdint>

#include "absl/time/time.h"

namespace reach {

// Makes glibc's malloc keep freed memory for reuse instead of returning it
// to the kernel after every call: no mmap for blocks under 1 MiB (glibc's
// dynamic threshold would otherwise rise to the largest block freed) and
// no heap trimming until 32 MiB are free at its top. Without it each large
// call pays fresh page faults and zeroing for its message buffers (on this
// project's 2-core VM: SolveBatch p50 4.4 ms -> 3.8 ms, parsing its
// response 1.3 ms -> 0.6 ms; bench/service_bench; those buffers are a few
// hundred KB). Blocks of 1 MiB and more (8 MiB messages) are mapped on
// their own and go back to the kernel when freed: kept in the heap, a
// burst of them left 136 MiB resident against a 64 MiB budget
// (scripts/harden-check memory-slow-consumer; 65-104 MiB mapped). Call
// once at start, before threads exist.
// False when the allocator refused a setting (AddressSanitizer's allocator,
// which replaces glibc's, ignores mallopt).
bool RetainFreedMemory();

// What RetainFreedMemory keeps is given back after large calls instead:
// once a call lets go of at least kTrimAfterBytes (NoteReleased, called by
// MemoryBudget::Release), a background thread waits kTrimDelay, then
// returns every arena's free pages to the kernel (malloc_trim), at most
// once per kMinTrimInterval, and once more kSettleTrimDelay after the
// last. Small calls never trigger it, so they keep
// the retained memory's speed; a burst of large ones leaves the process's
// resident memory near what it holds rather than at its peak (8 MiB
// stream frames from gRPC's several threads otherwise leave freed memory
// in each thread's arena). Call once at start; without it NoteReleased
// does nothing.
inline constexpr int64_t kTrimAfterBytes = int64_t{1} << 20;
inline constexpr absl::Duration kTrimDelay = absl::Milliseconds(1);
inline constexpr absl::Duration kMinTrimInterval = absl::Milliseconds(10);
// And once more this long after the last large release.
inline constexpr absl::Duration kSettleTrimDelay = absl::Milliseconds(500);
void StartMemoryTrimmer();
void NoteReleased(int64_t bytes);
// Trims done so far.
int64_t MemoryTrims();

}  // namespace reach

#endif  // REACH_SERVER_MEMORY_H_

// Process-wide allocator tuning for a server whose calls allocate and free
// large buffers (a 1000-character SolveBatch moves ~640 KB of messages).
#ifndef REACH_SERVER_MEMORY_H_
#define REACH_SERVER_MEMORY_H_

namespace reach {

// Makes glibc's malloc keep freed memory for reuse instead of returning it
// to the kernel after every call: no mmap for blocks under 32 MiB and no
// heap trimming until 256 MiB are free at its top. Without it each large
// call pays fresh page faults and zeroing for its message buffers (on this
// project's 2-core VM: SolveBatch p50 4.4 ms -> 3.8 ms, parsing its
// response 1.3 ms -> 0.6 ms; bench/service_bench). The process's resident
// memory then stays at its peak. Call once at start, before threads exist.
// False when the allocator refused a setting (AddressSanitizer's allocator,
// which replaces glibc's, ignores mallopt).
bool RetainFreedMemory();

}  // namespace reach

#endif  // REACH_SERVER_MEMORY_H_

#include "server/memory.h"

#include <malloc.h>

namespace reach {

bool RetainFreedMemory() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace reach

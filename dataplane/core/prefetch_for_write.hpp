// Starting to load a cache line that the caller is about to write, in the state a write
// needs: owned by this core alone.
//
// Why not __builtin_prefetch(p, 1): on x86 GCC emits PREFETCHW for it only when the target
// has PRFCHW, and DPDK's pkg-config flags end in -march=corei7, which has not, so it became a
// plain PREFETCHT0. That fetches a line shared. With more than one worker a flow table's lines
// are shared between cores (a set holds flows of every worker), and the tick touch or the
// bucket's compare-and-swap that follows the prefetch then waited for a second trip, to take
// the line from the other core. PREFETCHW fetches it owned while the burst's other packets
// are worked on. AMD's x86-64 CPUs all have it; Intel's report it from Broadwell on, and older
// Intel 64 cores execute its opcode (0F 0D /1) as a no-op: 64-bit Windows from 8.1 on refuses
// a CPU without PrefetchW and installs on Core 2 and Nehalem, and this build needs Nehalem
// (SSE4.2: DPDK's -march=corei7) anyway. (Not run on such a CPU here.) A single worker's lines
// are in no other cache, so for it the two prefetches are the same.
#pragma once

namespace sluice {

[[gnu::always_inline]] inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

}  // namespace sluice

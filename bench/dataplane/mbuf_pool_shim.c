// Benchmark-only LD_PRELOAD shim (scripts/bench_dataplane.sh): raises the mbuf count of every
// rte_pktmbuf_pool_create() call to at least $SLUICE_BENCH_MBUFS.
//
// Why: net_pcap with infinite_rx=1 copies the whole trace into mbufs of the RX queue's pool at
// start and keeps them, so a 1M-packet trace needs > 1M mbufs; sluiced sizes its pool from its
// descriptor rings (~8k mbufs, dataplane/live/dataplane.cpp pool_size()) and has no option to
// change it. Until it has one (e.g. `--mbufs N` -> DataplaneConfig), this shim stands in for it.
// Nothing else changes: same element size, cache size and socket as sluiced asked for.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct rte_mempool;
typedef struct rte_mempool* (*pool_create_fn)(const char*, unsigned, unsigned, uint16_t, uint16_t,
                                              int);

struct rte_mempool* rte_pktmbuf_pool_create(const char* name, unsigned n, unsigned cache_size,
                                            uint16_t priv_size, uint16_t data_room_size,
                                            int socket_id) {
  static pool_create_fn real;
  if (!real) real = (pool_create_fn)dlsym(RTLD_NEXT, "rte_pktmbuf_pool_create");
  const char* want = getenv("SLUICE_BENCH_MBUFS");
  if (want) {
    unsigned long w = strtoul(want, NULL, 10);
    if (w > n) {
      fprintf(stderr, "mbuf_pool_shim: pool '%s': %u -> %lu mbufs\n", name, n, w);
      n = (unsigned)w;
    }
  }
  return real(name, n, cache_size, priv_size, data_room_size, socket_id);
}

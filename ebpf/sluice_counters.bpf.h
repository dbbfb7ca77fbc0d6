/*
 * The per-rule counters of SPEC §5: per-CPU packets and bytes per (state slot, outcome), summed
 * by the loader (XdpProgram::counters).
 */
#ifndef SLUICE_EBPF_SLUICE_COUNTERS_BPF_H
#define SLUICE_EBPF_SLUICE_COUNTERS_BPF_H

#include "sluice_maps.bpf.h"

static __always_inline void sl_count(__u32 slot, __u32 outcome, __u32 len) {
  __u32 idx = sl_counter_index(slot, outcome);
  struct sl_counter *c = bpf_map_lookup_elem(&sl_counters, &idx);
  if (c) {
    c->packets += 1;
    c->bytes += len;
  }
}

#endif /* SLUICE_EBPF_SLUICE_COUNTERS_BPF_H */

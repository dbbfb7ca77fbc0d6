/*
 * The per-rule counters of SPEC §5: per-CPU packets and bytes per state slot and outcome,
 * summed by the loader (XdpProgram::counters). A packet looks its slot's counters up once
 * (sl_counters_of) and adds to each outcome it counts (sl_add).
 */
#ifndef SLUICE_EBPF_SLUICE_COUNTERS_BPF_H
#define SLUICE_EBPF_SLUICE_COUNTERS_BPF_H

#include "sluice_maps.bpf.h"

static __always_inline struct sl_slot_counters *sl_counters_of(__u32 slot) {
  return bpf_map_lookup_elem(&sl_counters, &slot);
}

static __always_inline void sl_add(struct sl_slot_counters *c, __u32 outcome, __u32 len) {
  if (!c || outcome >= SL_OUTCOME_COUNT) return;
  c->outcome[outcome].packets += 1;
  c->outcome[outcome].bytes += len;
}

#endif /* SLUICE_EBPF_SLUICE_COUNTERS_BPF_H */

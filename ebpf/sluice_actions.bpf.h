/*
 * Actions (frame_rewrite.cpp's semantics): drop, DSCP marking with the IPv4 checksum updated
 * incrementally (the IPv6 traffic class has none), pass; each counted; and a packet's cost.
 */
#ifndef SLUICE_EBPF_SLUICE_ACTIONS_BPF_H
#define SLUICE_EBPF_SLUICE_ACTIONS_BPF_H

#include "sluice_counters.bpf.h"
#include "sluice_parse.bpf.h"

/* RFC 1624 eqn. 3, as frame_rewrite.cpp. */
static __always_inline __u16 sl_csum_update16(__u16 check, __u16 old_word, __u16 new_word) {
  __u32 sum = (__u32)(__u16)~check + (__u16)~old_word + new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return (__u16)~sum;
}

/* DSCP marking (frame_rewrite.cpp's mark_dscp): 1 if the frame is IP and was (re)marked. */
static __always_inline int sl_mark_dscp(struct xdp_md *ctx, const struct sl_frame *f, __u8 dscp) {
  __u8 h[12];
  if (dscp > 63) return 0;
  if (f->ip_version == 4) {
    __u8 tos;
    __u16 old_word, check;
    if (bpf_xdp_load_bytes(ctx, f->l3_offset, h, 12)) return 0;
    tos = (__u8)(dscp << 2 | (h[1] & 0x03));
    if (tos == h[1]) return 1; /* leave even a -0/+0 checksum spelling as it was */
    old_word = sl_be16(h);
    h[1] = tos;
    check = sl_csum_update16(sl_be16(h + 10), old_word, sl_be16(h));
    h[10] = (__u8)(check >> 8);
    h[11] = (__u8)check;
    if (bpf_xdp_store_bytes(ctx, f->l3_offset, h, 2)) return 0;
    if (bpf_xdp_store_bytes(ctx, f->l3_offset + 10, h + 10, 2)) return 0;
    return 1;
  }
  if (f->ip_version == 6) {
    if (bpf_xdp_load_bytes(ctx, f->l3_offset, h, 2)) return 0;
    h[0] = (__u8)((h[0] & 0xf0) | dscp >> 2);
    h[1] = (__u8)((h[1] & 0x3f) | (dscp & 0x03) << 6);
    return bpf_xdp_store_bytes(ctx, f->l3_offset, h, 2) ? 0 : 1;
  }
  return 0;
}

static __always_inline int sl_act(struct xdp_md *ctx, struct sl_action_entry a,
                                  struct sl_slot_counters *cnt, const struct sl_frame *f,
                                  int parsed_ok) {
  if (a.kind == SL_ACT_DROP) {
    sl_add(cnt, SL_OUTCOME_DROPPED, f->len);
    return XDP_DROP;
  }
  if (a.kind == SL_ACT_MARK_DSCP && parsed_ok && sl_mark_dscp(ctx, f, a.dscp)) {
    sl_add(cnt, SL_OUTCOME_MARKED, f->len);
    return XDP_PASS;
  }
  sl_add(cnt, SL_OUTCOME_PASSED, f->len);
  return XDP_PASS;
}

static __always_inline __u64 sl_cost(const struct sl_xdp_rule *r, __u32 len) {
  return r->cost_unit == SL_COST_PACKETS ? 1 : (__u64)len + r->overhead_bytes;
}

#endif /* SLUICE_EBPF_SLUICE_ACTIONS_BPF_H */

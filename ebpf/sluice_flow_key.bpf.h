/*
 * A frame's flow key under a rule's key mode, laid out as the core's FlowKey
 * (dataplane/core/flow_key.hpp; sluice_abi.h struct sl_flow_key).
 */
#ifndef SLUICE_EBPF_SLUICE_FLOW_KEY_BPF_H
#define SLUICE_EBPF_SLUICE_FLOW_KEY_BPF_H

#include <linux/types.h>

#include "sluice_abi.h"
#include "sluice_parse.bpf.h"

/* The first `bits` (< 64) bits of 8 wire-order bytes loaded little-endian. */
static __always_inline __u64 sl_keep_prefix64(__u64 word, __u32 bits) {
  __u32 full, rem;
  __u64 mask;
  if (bits >= 64) return word;
  if (bits == 0) return 0;
  full = bits / 8;
  rem = bits % 8;
  mask = full ? (((__u64)1) << (8 * full)) - 1 : 0;
  if (rem) mask |= (__u64)((0xff00u >> rem) & 0xff) << (8 * full);
  return word & mask;
}

struct sl_addr {
  __u64 a, b;
};

static __always_inline struct sl_addr sl_load_addr(const __u8 *addr, __u8 version) {
  struct sl_addr x = {0, 0};
  if (version == 6) {
    __builtin_memcpy(&x.a, addr, 8);
    __builtin_memcpy(&x.b, addr + 8, 8);
  } else {
    __u32 v;
    __builtin_memcpy(&v, addr, 4);
    x.a = v;
  }
  return x;
}

static __always_inline struct sl_addr sl_keep_prefix(struct sl_addr x, __u32 bits) {
  struct sl_addr r;
  r.a = sl_keep_prefix64(x.a, bits);
  r.b = bits > 64 ? sl_keep_prefix64(x.b, bits - 64) : 0;
  return r;
}

static __always_inline void sl_flow_key_of(const struct sl_frame *f, const struct sl_xdp_rule *r,
                                           struct sl_flow_key *k) {
  const __u32 addr_bits = f->ip_version == 6 ? 128 : 32;
  __u64 meta = (__u64)r->key_mode | (__u64)f->ip_version << 8;
  struct sl_addr src = {0, 0}, dst = {0, 0};
  __u32 bits;
  switch (r->key_mode) {
    case SL_KEY_SRC_IP: src = sl_load_addr(f->src, f->ip_version); break;
    case SL_KEY_DST_IP: dst = sl_load_addr(f->dst, f->ip_version); break;
    case SL_KEY_SRC_PREFIX:
    case SL_KEY_DST_PREFIX:
      bits = r->key_prefix_len > addr_bits ? addr_bits : r->key_prefix_len;
      meta |= (__u64)bits << 16;
      if (r->key_mode == SL_KEY_SRC_PREFIX)
        src = sl_keep_prefix(sl_load_addr(f->src, f->ip_version), bits);
      else
        dst = sl_keep_prefix(sl_load_addr(f->dst, f->ip_version), bits);
      break;
    case SL_KEY_FIVE_TUPLE:
      meta |= (__u64)f->proto << 24 | (__u64)f->src_port << 32 | (__u64)f->dst_port << 48;
      /* fall through */
    case SL_KEY_SRC_DST:
      src = sl_load_addr(f->src, f->ip_version);
      dst = sl_load_addr(f->dst, f->ip_version);
      break;
    default: break;
  }
  k->w[0] = meta;
  if (f->ip_version == 6) {
    k->w[1] = src.a, k->w[2] = src.b, k->w[3] = dst.a, k->w[4] = dst.b;
  } else {
    k->w[1] = src.a | dst.a << 32, k->w[2] = 0, k->w[3] = 0, k->w[4] = 0;
  }
}

#endif /* SLUICE_EBPF_SLUICE_FLOW_KEY_BPF_H */

/*
 * The XDP program's frame parser: the core's semantics (dataplane/core/frame_parser.cpp, SPEC
 * §6) over bpf_xdp_load_bytes, so every read is checked by the helper as well as by the same
 * length tests the core makes, in the same order: a frame the core calls malformed is
 * malformed here (tests/bpf/ holds the two to it on the core's own fixtures).
 */
#ifndef SLUICE_EBPF_SLUICE_PARSE_BPF_H
#define SLUICE_EBPF_SLUICE_PARSE_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* What the parser extracts (the fields of the core's ParsedFrame the program uses). */
struct sl_frame {
  __u32 len;
  __u16 l3_offset;
  __u16 outer_vlan;
  __u16 src_port;
  __u16 dst_port;
  __u8 ip_version; /* 0: not IP */
  __u8 vlan_count;
  __u8 proto;
  __u8 dscp;
  __u8 has_ports;
  __u8 reserved[3];
  __u8 src[16]; /* IPv4 in the first 4 bytes */
  __u8 dst[16];
};

#define SL_ETH_HLEN 14
#define SL_IPV4_MIN_HLEN 20
#define SL_IPV6_HLEN 40
#define SL_IPV6_MIN_EXT_LEN 8
#define SL_IPV6_MAX_EXT 8 /* the core's kMaxIPv6ExtHeaders */
#define SL_MAX_VLAN_TAGS 2

static __always_inline __u16 sl_be16(const __u8 *p) { return (__u16)(p[0] << 8 | p[1]); }

/* n (a constant: 2, 4, 20 or 40) bytes from src in the frame's linear part to dst (8-byte
 * aligned), in 8-, 4- and 2-byte words: a __builtin_memcpy from a frame pointer (alignment 1)
 * becomes one byte load and one byte store per byte. A frame pointer may be unaligned: the
 * verifier checks packet alignment only on architectures without efficient unaligned access,
 * and x86-64 (the only JIT this project targets) has it. */
static __always_inline void sl_copy_words(void *dst, const void *src, const __u32 n) {
  __u32 at = 0;
  for (; at + 8 <= n; at += 8) {
    const __u64 w = *(const __u64 *)(src + at);
    __builtin_memcpy(dst + at, &w, 8);
  }
  if (at + 4 <= n) {
    const __u32 w = *(const __u32 *)(src + at);
    __builtin_memcpy(dst + at, &w, 4);
    at += 4;
  }
  if (at + 2 <= n) {
    const __u16 w = *(const __u16 *)(src + at);
    __builtin_memcpy(dst + at, &w, 2);
  }
}

/* bpf_xdp_load_bytes() semantics (0, or an error if [off, off+n) is not all in the frame),
 * with the helper call saved where the bytes lie in the linear part of the frame (every
 * frame of a driver without multi-buffer XDP): a direct copy after the verifier's bounds
 * check. Frames longer than 64 KiB or fragmented take the helper. buf: 8-byte aligned. */
#define sl_load_bytes(ctx, off, buf, n)                                          \
  ({                                                                             \
    __u32 sl_off_ = (off);                                                       \
    void *sl_data_ = (void *)(long)(ctx)->data;                                  \
    void *sl_end_ = (void *)(long)(ctx)->data_end;                               \
    int sl_rc_ = 0;                                                              \
    if (sl_off_ < 0xffff && sl_data_ + sl_off_ + (n) <= sl_end_) {               \
      sl_copy_words((buf), sl_data_ + sl_off_, (n));                             \
    } else {                                                                     \
      sl_rc_ = bpf_xdp_load_bytes((ctx), sl_off_, (buf), (n));                   \
    }                                                                            \
    sl_rc_;                                                                      \
  })

static __always_inline int sl_is_vlan_tpid(__u16 t) { return t == 0x8100 || t == 0x88a8; }

/* hop-by-hop, routing, fragment, destination options, AH; ESP (50) ends the walk. */
static __always_inline int sl_is_ipv6_ext(__u8 nh) {
  return nh == 0 || nh == 43 || nh == 44 || nh == 60 || nh == 51;
}

static __always_inline int sl_carries_ports(__u8 p) { return p == 6 || p == 17 || p == 132; }

static __always_inline __u32 sl_min_l4_len(__u8 p) {
  switch (p) {
    case 6: return 20;
    case 17: return 8;
    case 132: return 12;
    case 1:
    case 58: return 4;
    default: return 0;
  }
}

/* 0 on success, -1 malformed. l4 <= ip_end <= frame length. */
static __always_inline int sl_parse_l4(struct xdp_md *ctx, __u32 l4, __u32 ip_end,
                                       struct sl_frame *f) {
  __u8 ports[4] __attribute__((aligned(8)));
  if (ip_end - l4 < sl_min_l4_len(f->proto)) return -1;
  if (sl_carries_ports(f->proto)) {
    if (sl_load_bytes(ctx, l4, ports, sizeof(ports))) return -1;
    f->has_ports = 1;
    f->src_port = sl_be16(ports);
    f->dst_port = sl_be16(ports + 2);
  }
  return 0;
}

static __always_inline int sl_parse_ipv4(struct xdp_md *ctx, __u32 l3, struct sl_frame *f) {
  __u8 ip[SL_IPV4_MIN_HLEN] __attribute__((aligned(8)));
  __u32 len = f->len, header_len, total_len;
  __u16 frag;
  if (len - l3 < SL_IPV4_MIN_HLEN) return -1;
  if (sl_load_bytes(ctx, l3, ip, sizeof(ip))) return -1;
  if ((ip[0] >> 4) != 4) return -1;
  header_len = (ip[0] & 0x0fu) * 4;
  if (header_len < SL_IPV4_MIN_HLEN) return -1;
  if (header_len > len - l3) return -1;
  total_len = sl_be16(ip + 2);
  if (total_len < header_len) return -1;
  if (total_len > len - l3) return -1; /* bytes past total_len are padding: allowed */
  f->ip_version = 4;
  f->dscp = ip[1] >> 2;
  f->proto = ip[9];
  __builtin_memcpy(f->src, ip + 12, 4);
  __builtin_memcpy(f->dst, ip + 16, 4);
  frag = sl_be16(ip + 6);
  if ((frag & 0x1fff) != 0) return 0; /* non-first fragment: addresses only (SPEC §6) */
  return sl_parse_l4(ctx, l3 + header_len, l3 + total_len, f);
}

static __always_inline int sl_parse_ipv6(struct xdp_md *ctx, __u32 l3, struct sl_frame *f) {
  __u8 ip[SL_IPV6_HLEN] __attribute__((aligned(8)));
  __u32 len = f->len, ip_end, off;
  __u8 nh;
  if (len - l3 < SL_IPV6_HLEN) return -1;
  if (sl_load_bytes(ctx, l3, ip, sizeof(ip))) return -1;
  if ((ip[0] >> 4) != 6) return -1;
  ip_end = l3 + SL_IPV6_HLEN + sl_be16(ip + 4);
  if (ip_end > len) return -1;
  f->ip_version = 6;
  f->dscp = (__u8)((ip[0] & 0x0fu) << 2 | ip[1] >> 6);
  __builtin_memcpy(f->src, ip + 8, 16);
  __builtin_memcpy(f->dst, ip + 24, 16);
  nh = ip[6];
  off = l3 + SL_IPV6_HLEN;
  for (int i = 0; i < SL_IPV6_MAX_EXT; ++i) {
    __u8 ext[4] __attribute__((aligned(8)));
    __u32 ext_len;
    if (!sl_is_ipv6_ext(nh)) break;
    if (ip_end - off < SL_IPV6_MIN_EXT_LEN) return -1;
    if (sl_load_bytes(ctx, off, ext, sizeof(ext))) return -1;
    ext_len = nh == 51 ? (ext[1] + 2u) * 4 : (ext[1] + 1u) * 8;
    if (nh == 44) {
      if ((sl_be16(ext + 2) >> 3) != 0) { /* the L4 header is in fragment 0 */
        f->proto = ext[0];
        return 0;
      }
      ext_len = SL_IPV6_MIN_EXT_LEN; /* its second byte is reserved, not a length */
    }
    if (ext_len > ip_end - off) return -1;
    nh = ext[0];
    off += ext_len;
  }
  if (sl_is_ipv6_ext(nh)) return -1; /* too many extension headers */
  f->proto = nh;
  return sl_parse_l4(ctx, off, ip_end, f);
}

/* Ethernet, up to two VLAN tags, then IPv4 / IPv6; anything else is fine, just not IP. */
static __always_inline int sl_parse_frame(struct xdp_md *ctx, struct sl_frame *f) {
  __u8 b[4] __attribute__((aligned(8)));
  __u32 len = f->len, type_off = 12, l3;
  __u16 type;
  if (len < SL_ETH_HLEN) return -1;
  if (sl_load_bytes(ctx, type_off, b, 2)) return -1;
  type = sl_be16(b);
  for (int i = 0; i <= SL_MAX_VLAN_TAGS; ++i) {
    if (!sl_is_vlan_tpid(type)) break;
    if (f->vlan_count == SL_MAX_VLAN_TAGS) return -1;
    if (len - type_off < 2 + 4) return -1; /* the TCI and the next ethertype */
    if (sl_load_bytes(ctx, type_off + 2, b, 4)) return -1;
    if (f->vlan_count == 0) f->outer_vlan = sl_be16(b) & 0x0fff;
    f->vlan_count++;
    type_off += 4;
    type = sl_be16(b + 2);
  }
  l3 = type_off + 2;
  f->l3_offset = (__u16)l3;
  if (type == 0x0800) return sl_parse_ipv4(ctx, l3, f);
  if (type == 0x86dd) return sl_parse_ipv6(ctx, l3, f);
  return 0;
}

#endif /* SLUICE_EBPF_SLUICE_PARSE_BPF_H */

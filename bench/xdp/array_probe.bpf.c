/*
 * The memory floor of scripts/bench_xdp.sh's 1M-flow rows: what one random access to a
 * per-flow array costs, with nothing else. A BPF array of 1 KB elements (sluice's flow sets,
 * BPF_F_MMAPABLE like sluice's tables) sized by the loader to sluice's set count for the flow
 * count; the element of the IPv4 source's hash looked up and one word of its first line
 * incremented. No parse beyond the source address, no clock, no atomics, one line of one page:
 * any flow table of this size costs at least this per packet (sluice's reads two lines of
 * the page, the tag line and the bucket line it points to).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u64 probe_set_count = 1; /* the array's max_entries, set before load */

struct probe_set {
  __u64 w[128];
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* set before load */
  __uint(map_flags, BPF_F_MMAPABLE);
  __type(key, __u32);
  __type(value, struct probe_set);
} probe_sets SEC(".maps");

/* The high 64 bits of a * b (fastrange, as sluice's set index). */
static __always_inline __u64 mul_hi(__u64 a, __u64 b) {
  const __u64 al = (__u32)a, ah = a >> 32, bl = (__u32)b, bh = b >> 32;
  const __u64 p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
  const __u64 mid = (p0 >> 32) + (__u32)p1 + (__u32)p2;
  return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

SEC("xdp")
int bench_array_probe(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
  struct ethhdr *eth = data;
  struct iphdr *ip = (void *)(eth + 1);
  struct probe_set *s;
  __u32 set;
  if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  set = (__u32)mul_hi((__u64)ip->saddr * 0x9e3779b97f4a7c15ull, probe_set_count);
  s = bpf_map_lookup_elem(&probe_sets, &set);
  if (!s) return XDP_PASS;
  s->w[0] += 1;
  return XDP_PASS;
}

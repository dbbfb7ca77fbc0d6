/*
 * The reference of scripts/bench_xdp.sh: the naive per-source token bucket the issue compares
 * sluice with. One bpf_map_lookup_elem in a hash map keyed by the IPv4 source, a
 * bpf_ktime_get_ns, plain (non-atomic) updates, integer tokens; an insert on a new source.
 * Not a limiter to use (racy, refill truncated): the least work a per-flow limiter does.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define RATE_PER_S 1000000ull
#define BURST 1000000ull

struct bucket {
  __u64 tokens;
  __u64 last_ns;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1 << 21);
  __type(key, __u32);
  __type(value, struct bucket);
} naive_buckets SEC(".maps");

SEC("xdp")
int bench_naive_tb(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
  struct ethhdr *eth = data;
  struct iphdr *ip = (void *)(eth + 1);
  struct bucket *b;
  __u64 now;
  __u32 src;
  if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  src = ip->saddr;
  now = bpf_ktime_get_ns();
  b = bpf_map_lookup_elem(&naive_buckets, &src);
  if (!b) {
    struct bucket fresh = {BURST - 1, now};
    bpf_map_update_elem(&naive_buckets, &src, &fresh, BPF_ANY);
    return XDP_PASS;
  }
  b->tokens += (now - b->last_ns) * RATE_PER_S / 1000000000ull;
  if (b->tokens > BURST) b->tokens = BURST;
  b->last_ns = now;
  if (b->tokens == 0) return XDP_DROP;
  b->tokens -= 1;
  return XDP_PASS;
}

/* The live floor of scripts/bench_xdp.sh (in place of `xdp-bench drop`, which this kernel
 * refuses): drop every frame, counting them in a per-CPU array. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} drop_count SEC(".maps");

SEC("xdp")
int bench_drop(struct xdp_md *ctx) {
  __u32 zero = 0;
  __u64 *n = bpf_map_lookup_elem(&drop_count, &zero);
  (void)ctx;
  if (n) *n += 1;
  return XDP_DROP;
}

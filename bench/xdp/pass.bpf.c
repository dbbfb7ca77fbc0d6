/* The floor of scripts/bench_xdp.sh: an XDP program that does nothing but pass the frame. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("xdp")
int bench_pass(struct xdp_md *ctx) {
  (void)ctx;
  return XDP_PASS;
}

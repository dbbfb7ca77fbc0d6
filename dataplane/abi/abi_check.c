/*
 * Proves on every build that bucket_math.h and sluice_abi.h are the plain C both backends
 * claim: meson compiles this file as C11 with -pedantic -Werror (and runs it as a test) and
 * with clang -target bpf (an object that only has to compile). The checks are ones a silent
 * change of the shared header would break.
 */
#include "sluice_abi.h"

_Static_assert(sizeof(struct sl_rule_bits) == 8 * SL_XDP_RULE_WORDS, "bitmap words");
_Static_assert(sizeof(struct sl_xdp_rule) == 384, "compiled rule entry");
_Static_assert(__builtin_offsetof(struct sl_xdp_rule, cur) == 24, "hot fields, then cur.rate, in line 0");
_Static_assert(sizeof(struct sl_bucket) == 56, "bucket value");
_Static_assert(sizeof(struct sl_flow_key) == 40, "flow key");
_Static_assert(sizeof(struct sl_flow_slot) == 64, "a way's bucket: one cache line");
_Static_assert(sizeof(struct sl_flow_set) == SL_FT_SET_BYTES, "a flow table set: 1 KB");
_Static_assert(__builtin_offsetof(struct sl_flow_set, slot) == 64, "the tag line, then the buckets");
_Static_assert(sizeof(struct sl_flow_meta) == 128 && __builtin_offsetof(struct sl_flow_meta, active) == 64,
               "a table's numbers in line 0, its counts in line 1");
_Static_assert(sizeof(struct sl_slot_counters) == 16 * SL_OUTCOME_COUNT, "slot counters");
_Static_assert(SL_OUTCOME_COUNT == 11 && SL_OUTCOME_RED == 10, "outcome order");
_Static_assert(SL_XDP_DEFAULT_SLOT == SL_XDP_STATE_SLOTS, "default counters after the state slots");

#if defined(__bpf__)
/* The BPF build: the bucket arithmetic must compile for the BPF target, not just parse. */
int sl_abi_check_bpf(const struct sl_rate_profile *p, sl_u64 word, sl_u64 now_ns);
int sl_abi_check_bpf(const struct sl_rate_profile *p, sl_u64 word, sl_u64 now_ns) {
  sl_u64 next = 0;
  return sl_tb_decide(p, word, now_ns, 1, &next) + (int)(next & 1);
}
#else
#include <stdio.h>

int main(void) {
  struct sl_rate_profile p = {0};
  sl_u64 word, next = 0;
  int failures = 0;
  /* one packet per 2^16 u (interval 1 << 16 fraction bits), burst of 4 packets */
  p.interval_fp = ((sl_u64)1 << 16) << SL_INTERVAL_FRAC_BITS;
  p.burst_u = (sl_u64)4 << 16;
  p.burst_tokens = 4;
  word = sl_tb_init(&p, 1000);
  for (int i = 0; i < 4; ++i) failures += !sl_tb_decide(&p, word, 1000, 1, &next), word = next;
  failures += sl_tb_decide(&p, word, 1000, 1, &next); /* the fifth at once is refused */
  failures += SL_XDP_DEFAULT_SLOT != SL_XDP_COUNTER_SLOTS - 1;
  if (failures) fprintf(stderr, "abi_check: %d failures\n", failures);
  return failures != 0;
}
#endif

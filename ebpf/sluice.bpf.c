/*
 * sluice's XDP backend: the rules of a rules file enforced inside the kernel with the core's
 * semantics (pipeline.cpp's finish/charge_chain), the core's bucket arithmetic (bucket_math.h)
 * and the shared classification scheme (match_tables.hpp), over maps laid out in
 * dataplane/abi/sluice_abi.h. The loader is ebpf/xdp_program.cpp.
 *
 * Verdicts: a forwarded packet gets XDP_PASS (the kernel stack delivers it, rewritten if it
 * was marked), a dropped one XDP_DROP. Leaky-bucket (shaping) rules never reach the program:
 * XDP cannot hold a packet, so the loader refuses them and names the DPDK backend.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "sluice_abi.h"
#include "sluice_actions.bpf.h"
#include "sluice_buckets.bpf.h"
#include "sluice_classify.bpf.h"
#include "sluice_counters.bpf.h"
#include "sluice_maps.bpf.h"
#include "sluice_parse.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Load-time switch (see sluice_abi.h "Test clock"). */
const volatile __u8 sl_test_clock = 0;

/*
 * One level of a packet's rule chain, and its refund, as global functions: the verifier checks
 * each once, on its own, instead of once per level and path of the chain walk below (inlined,
 * the walk passed the verifier's million-instruction budget).
 */
enum sl_charge_result {
  SL_CHARGE_CONFORMED = 0,
  SL_CHARGE_REFUSED = 1,
  SL_CHARGE_NO_SLOT = 2,
  SL_CHARGE_GREEN = 3, /* meters: SL_CHARGE_GREEN + colour */
};

/* `at`: the key of the rule in sl_rules (bank * SL_XDP_MAX_RULES + index). */
__attribute__((noinline)) int sl_charge(const struct sl_frame *f, __u32 at, __u64 now_ns) {
  struct sl_xdp_rule *r;
  struct sl_bucket *b;
  if (!f) return SL_CHARGE_NO_SLOT;
  r = bpf_map_lookup_elem(&sl_rules, &at);
  if (!r) return SL_CHARGE_NO_SLOT;
  b = sl_state_for(r, f, now_ns);
  if (!b) return SL_CHARGE_NO_SLOT;
  if (r->algorithm == SL_ALG_SRTCM || r->algorithm == SL_ALG_TRTCM)
    return SL_CHARGE_GREEN + (int)sl_meter(r, b, now_ns, sl_cost(r, f->len));
  return sl_police(r, b, now_ns, sl_cost(r, f->len)) ? SL_CHARGE_CONFORMED : SL_CHARGE_REFUSED;
}

/* Gives back what sl_charge(f, at, now_ns) took (SPEC §3 Hierarchy). */
__attribute__((noinline)) int sl_refund_at(const struct sl_frame *f, __u32 at, __u64 now_ns) {
  struct sl_xdp_rule *r;
  struct sl_bucket *b;
  __u32 state;
  if (!f) return 0;
  r = bpf_map_lookup_elem(&sl_rules, &at);
  if (!r) return 0;
  state = r->state;
  if (r->key_mode == SL_KEY_NONE)
    b = bpf_map_lookup_elem(&sl_aggregates, &state);
  else
    b = sl_flow_find(r, f);
  if (b) sl_refund(r, b, now_ns, sl_cost(r, f->len));
  return 0;
}

__attribute__((noinline)) int sl_parse(struct xdp_md *ctx, struct sl_frame *f) {
  if (!f) return -1;
  return sl_parse_frame(ctx, f);
}

__attribute__((noinline)) int sl_classify_frame(const struct sl_frame *f, __u32 port,
                                                __u32 bank, __u32 mask) {
  if (!f) return -1;
  return sl_classify(f, port, bank, mask);
}

static __always_inline void sl_refund_below(const struct sl_xdp_rule *top, __u32 base,
                                            const struct sl_frame *f, int levels, __u64 now_ns) {
  for (int l = 0; l < SL_XDP_MAX_CHAIN; ++l) {
    if (l >= levels) break;
    sl_refund_at(f, base + ((__u32)top->chain[l] & (SL_XDP_MAX_RULES - 1)), now_ns);
  }
}

SEC("xdp")
int sluice_xdp(struct xdp_md *ctx) {
  __u32 zero = 0, port = 0, slot, bank, base;
  struct sl_slot_counters *cnt;
  struct sl_xdp_config *cfg = bpf_map_lookup_elem(&sl_config, &zero);
  struct sl_xdp_bank *bk;
  struct sl_frame f = {};
  struct sl_xdp_rule *top;
  __u32 *ifport;
  __u64 now_ns;
  int rule = -1, ok;
  if (!cfg) return XDP_PASS;
  bank = *(volatile __u32 *)&cfg->active_bank & (SL_XDP_BANKS - 1);
  bk = bpf_map_lookup_elem(&sl_banks, &bank);
  if (!bk) return XDP_PASS;
  base = bank * SL_XDP_MAX_RULES;
  f.len = (__u32)(ctx->data_end - ctx->data);
  ok = sl_parse(ctx, &f) == 0;
  if (!ok) { /* start from a clean frame so nothing classifies on half-parsed fields */
    __u32 len = f.len;
    __builtin_memset(&f, 0, sizeof(f));
    f.len = len;
  } else if (bk->rule_count) {
    if (bk->field_mask & SL_FIELD_INGRESS) {
      __u32 ifindex = ctx->ingress_ifindex;
      ifport = bpf_map_lookup_elem(&sl_ifport, &ifindex);
      if (ifport) port = *ifport;
    }
    rule = sl_classify_frame(&f, port, bank, bk->field_mask);
  }
  if (rule < 0 || (__u32)rule >= bk->rule_count || (__u32)rule >= SL_XDP_MAX_RULES) {
    cnt = sl_counters_of(SL_XDP_DEFAULT_SLOT);
    sl_add(cnt, SL_OUTCOME_MATCHED, f.len);
    if (!ok) sl_add(cnt, SL_OUTCOME_MALFORMED, f.len);
    return sl_act(ctx, bk->default_action, cnt, &f, ok);
  }
  slot = base + (__u32)rule;
  top = bpf_map_lookup_elem(&sl_rules, &slot);
  if (!top) return XDP_PASS;
  cnt = sl_counters_of(top->state); /* counters belong to the rule's state slot */
  sl_add(cnt, SL_OUTCOME_MATCHED, f.len);
  /* The clock only for a packet that charges a bucket (the default action needs none), read
   * after the bank: a packet that sees a new rule set reads a time no earlier than the
   * loader's switch (bucket conversions are stamped with that time); and before the flow
   * table's lines are asked for, since the clock read waits for loads in flight. */
  now_ns = sl_test_clock ? cfg->test_now_ns : bpf_ktime_get_ns();
  /* Charge the rule, then each parent; a refusal anywhere gives back what was taken below
   * it, so a refused packet charges nothing. A meter decides and acts where it stands. */
  for (int level = 0; level < SL_XDP_MAX_CHAIN; ++level) {
    __u32 at;
    struct sl_xdp_rule *r;
    int res;
    if (level >= top->chain_len) break;
    /* chain[0] is the rule itself: a lone rule's packet reads no line of its entry but the
     * first (sluice_abi.h) */
    at = level == 0 ? slot : base + ((__u32)top->chain[level] & (SL_XDP_MAX_RULES - 1));
    res = sl_charge(&f, at, now_ns);
    if (res == SL_CHARGE_CONFORMED) continue;
    /* only a packet that does not conform reads the level's actions */
    r = bpf_map_lookup_elem(&sl_rules, &at);
    if (!r) break;
    if (res >= SL_CHARGE_GREEN) {
      int colour = res - SL_CHARGE_GREEN;
      sl_add(cnt, colour == SL_GREEN    ? SL_OUTCOME_GREEN
                  : colour == SL_YELLOW ? SL_OUTCOME_YELLOW
                                        : SL_OUTCOME_RED,
             f.len);
      sl_add(cnt, colour == SL_GREEN ? SL_OUTCOME_CONFORMED : SL_OUTCOME_EXCEEDED, f.len);
      return sl_act(ctx, colour == SL_GREEN ? r->green : colour == SL_YELLOW ? r->yellow : r->red,
                    cnt, &f, 1);
    }
    sl_refund_below(top, base, &f, level, now_ns);
    sl_add(cnt, SL_OUTCOME_EXCEEDED, f.len);
    return sl_act(ctx, res == SL_CHARGE_NO_SLOT ? r->overflow : r->action, cnt, &f, 1);
  }
  sl_add(cnt, SL_OUTCOME_CONFORMED, f.len);
  sl_add(cnt, SL_OUTCOME_PASSED, f.len);
  return XDP_PASS;
}

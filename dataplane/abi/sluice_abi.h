/*
 * The kernel/user ABI of the XDP backend: everything that crosses between ebpf/sluice.bpf.c
 * and the user-space loader (ebpf/xdp_program.cpp), defined once. Plain C11 (checked as
 * -std=c11 -pedantic -Werror and as clang -target bpf on every build: dataplane/abi/meson.build);
 * sluice_abi.hpp beside it static_asserts the layout for C++.
 *
 * Limits. SL_XDP_MAX_RULES = 256: a rule set is classified with per-field bitmaps of
 * SL_XDP_RULE_WORDS 64-bit words (the shared scheme of match_tables.hpp), intersected word by
 * word in a bounded loop; 4 words keep every map value at 32 bytes and the loop at 4 rounds.
 * The loader refuses a larger rules file with a message saying so.
 *
 * Buckets. Single-word state (token-bucket, gcra, windows) is published with one 64-bit
 * compare-and-swap (__sync_val_compare_and_swap, BPF_CMPXCHG, -mcpu=v3), as the core does.
 * Meters (srtcm, trtcm) keep two full 64-bit time values (bucket_math.h sl_meter_state: the
 * committed empty time and the excess credit or peak empty time, each a time in 2^-k ns),
 * which cannot be packed into one 64-bit word without changing the arithmetic both backends
 * must share, and BPF has no 16-byte CAS. bpf_spin_lock was the other candidate, but this
 * kernel refuses a spin lock in an LRU hash value (map creation fails; only hash, array and
 * local-storage maps may hold one), and per-flow meters need the LRU table. So a bucket has a
 * sequence word instead: a writer decides on (w0, w1) read under an even sequence s, claims
 * the bucket with one CAS s -> s+1 (which fails if anyone published since), stores both words
 * and releases with s+2; a decision that changes nothing just re-checks s. That is a 16-byte
 * compare-and-swap made of a 64-bit one, lock-free for readers; it relies on loads not being
 * reordered with loads (x86-64, the only JIT this project targets). The same claim guards a
 * bucket's first initialisation (sequence 0: an aggregate starts full at its first packet's
 * time, which only that packet knows) and an idle flow's restart.
 *
 * Rule changes. Every rules-file-derived map holds two banks (SL_XDP_BANKS): arrays are indexed
 * bank * size + i, LPM keys start with the bank byte, hash keys carry it. The loader fills the
 * bank the program is not reading, then switches sl_xdp_config.active_bank with one map write,
 * so a packet sees the old rule set or the new one, never a mix. Buckets and counters belong to
 * a state slot (sl_xdp_rule.state, 0..SL_XDP_STATE_SLOTS-1), not to a rule index, so a rule
 * whose state identity is unchanged (rules_diff.hpp) keeps its slot in the new bank whatever
 * moved around it. A kept rule with a new rate, burst or limit gets a new generation: its
 * entry holds the new profiles (cur) and the old ones (prev); a bucket tagged with an older
 * generation is still read under prev until the loader has converted it (bucket_convert.hpp:
 * the tokens held at the change, capped at the new burst) and re-tagged it.
 *
 * Test clock. With the program's .rodata switch sl_test_clock set before load, now_ns is
 * sl_xdp_config.test_now_ns (map sl_config, key 0), which a BPF_PROG_TEST_RUN caller writes
 * before each packet to replay a trace with chosen timestamps; off (the default), now_ns is
 * bpf_ktime_get_ns() and the verifier prunes the map read as dead code.
 */
#ifndef SLUICE_ABI_SLUICE_ABI_H
#define SLUICE_ABI_SLUICE_ABI_H

#include "../core/bucket_math.h"
#include "sluice_enums.h"

#if defined(__bpf__)
typedef __u8 sl_u8;
typedef __u16 sl_u16;
typedef __s16 sl_s16;
typedef __s32 sl_s32;
#else
typedef uint8_t sl_u8;
typedef uint16_t sl_u16;
typedef int16_t sl_s16;
typedef int32_t sl_s32;
#endif

#define SL_XDP_MAX_RULES 256
#define SL_XDP_RULE_WORDS (SL_XDP_MAX_RULES / 64)
/* Deepest parent chain charged per packet (the core's kMaxChain). */
#define SL_XDP_MAX_CHAIN 8
/* Rule sets held at once: the one the program reads and the one being written. */
#define SL_XDP_BANKS 2
/* State slots (buckets, flows, counters): room for two full banks of distinct rules. */
#define SL_XDP_STATE_SLOTS (SL_XDP_BANKS * SL_XDP_MAX_RULES)
/* Counter slot of the default action, after the rules' state slots. */
#define SL_XDP_DEFAULT_SLOT SL_XDP_STATE_SLOTS
#define SL_XDP_COUNTER_SLOTS (SL_XDP_STATE_SLOTS + 1)
/* Disjoint port ranges a field's conditions cut 0..65535 into: at most two cuts per rule. */
#define SL_XDP_MAX_PORT_RANGES (2 * SL_XDP_MAX_RULES + 1)
/* LPM entries per trie: one per rule condition plus the /0 entry. */
#define SL_XDP_MAX_PREFIXES (SL_XDP_MAX_RULES + 1)
#define SL_XDP_VLAN_IDS 4096
#define SL_XDP_MAX_INGRESS_PORTS 1024
/* Interfaces given an ingress port id (map sl_ifport; an unlisted one is port 0). */
#define SL_XDP_MAX_IFACES 64
/* Flows of a keyed rule without max-flows (the DPDK backend's default_max_flows). */
#define SL_XDP_DEFAULT_FLOWS 65536

/* Pins: SL_XDP_PIN_ROOT/IFACE/<map name>, the map names being those of sluice.bpf.c. */
#define SL_XDP_PIN_ROOT "/sys/fs/bpf/sluice"

/* Bit i set: rule i (file order) is a candidate. */
struct sl_rule_bits {
  sl_u64 w[SL_XDP_RULE_WORDS];
};

/* BPF_MAP_TYPE_LPM_TRIE keys: prefix length in bits (8 for the bank, then the address
 * prefix), the bank, then the address in wire order. */
#define SL_LPM_BANK_BITS 8
struct sl_lpm_v4_key {
  sl_u32 prefixlen;
  sl_u8 bank;
  sl_u8 addr[4];
  sl_u8 pad[3]; /* zero */
};
struct sl_lpm_v6_key {
  sl_u32 prefixlen;
  sl_u8 bank;
  sl_u8 addr[16];
  sl_u8 pad[3]; /* zero */
};

/* Key of sl_ingress_bits: bank << 32 | ingress port id. */
static inline sl_u64 sl_ingress_key(sl_u32 bank, sl_u32 port) {
  return (sl_u64)bank << 32 | port;
}

/* Fields a rule set constrains (sl_xdp_bank.field_mask): the program skips the lookup of a
 * field no rule constrains (its table would give every rule for every value). */
enum sl_field_bit {
  SL_FIELD_VLAN = 1 << 0,
  SL_FIELD_INGRESS = 1 << 1,
  SL_FIELD_SRC = 1 << 2, /* v4 and v6 */
  SL_FIELD_DST = 1 << 3,
  SL_FIELD_PROTO = 1 << 4,
  SL_FIELD_DSCP = 1 << 5,
  SL_FIELD_SPORT = 1 << 6,
  SL_FIELD_DPORT = 1 << 7,
  SL_FIELD_IP = 1 << 8, /* some rule needs an IP frame (non-IP candidates differ) */
  SL_FIELD_ALL = (1 << 9) - 1
};

/* Keys of map sl_misc_bits: the candidates of frames a per-field table has no entry for. */
enum sl_misc_bits {
  SL_BITS_NO_PORTS = 0,      /* no L4 ports: not tcp/udp/sctp, or a non-first fragment */
  SL_BITS_UNTAGGED = 1,      /* no VLAN tag */
  SL_BITS_INGRESS_OTHER = 2, /* an ingress port id sl_ingress_bits does not list */
  SL_BITS_NON_IP = 3,        /* a frame that is not IP: replaces the L3/L4 lookups */
  SL_BITS_COUNT = 4
};

struct sl_action_entry {
  sl_u8 kind; /* enum sl_action_kind */
  sl_u8 dscp; /* for SL_ACT_MARK_DSCP */
};

/* The numbers a rule's buckets are read under. Profiles are the core's, built by
 * limiter_profile.cpp, so both backends run the same numbers through bucket_math.h. */
struct sl_xdp_profiles {
  struct sl_rate_profile rate;     /* token-bucket, gcra */
  struct sl_meter_profile meter;   /* srtcm, trtcm */
  struct sl_window_profile window; /* fixed-window, sliding-window */
};

/* One compiled rule (map sl_rules, key = bank * SL_XDP_MAX_RULES + rule index). */
struct sl_xdp_rule {
  /* First cache line: all a conforming packet of a lone policer reads (the fields its flow
   * lookup and charge need, then cur.rate at offset 24). */
  sl_u64 idle_timeout_ns;      /* a flow idle this long starts again full */
  sl_u32 overhead_bytes;       /* added to a frame's length for byte rates */
  sl_u32 gen;                  /* generation of cur (see "Rule changes") */
  sl_u16 state;                /* state slot: buckets, flows and counters */
  sl_u8 algorithm;             /* enum sl_algorithm */
  sl_u8 key_mode;              /* enum sl_key_mode */
  sl_u8 key_prefix_len;        /* SL_KEY_SRC_PREFIX / SL_KEY_DST_PREFIX */
  sl_u8 cost_unit;             /* enum sl_cost_unit */
  sl_u8 chain_len;             /* entries of chain[] in use, >= 1 */
  sl_u8 reserved[1];
  struct sl_xdp_profiles cur;  /* buckets of generation gen */
  struct sl_xdp_profiles prev; /* buckets of an older generation, until converted */
  sl_s32 parent;               /* rule index, -1: none */
  sl_s16 chain[SL_XDP_MAX_CHAIN]; /* this rule, then its parents, nearest first (same bank) */
  struct sl_action_entry action;   /* on exceeding (policers, windows) */
  struct sl_action_entry overflow; /* when no flow slot can be had */
  struct sl_action_entry green, yellow, red; /* meters */
  sl_u8 reserved2[10];
};

/* Map sl_config, key 0. */
struct sl_xdp_config {
  sl_u32 active_bank; /* the rule set packets see; one write switches it */
  sl_u32 generation;  /* rule sets applied so far (sluicectl's "only if still at G") */
  sl_u64 test_now_ns; /* now_ns when the program was loaded with sl_test_clock on */
};

/* Map sl_banks, key = bank: what belongs to a rule set besides its rules and tables. */
struct sl_xdp_bank {
  sl_u32 rule_count;
  struct sl_action_entry default_action;
  sl_u16 field_mask; /* enum sl_field_bit */
};

/*
 * Flow tables. Every keyed rule has a table of its own (as on the DPDK backend): an LRU hash
 * of at most the rule's max-flows entries, created by the loader when the rule gets its state
 * slot and held in sl_flow_tables (an array of maps) at that slot, so one rule's flood evicts
 * only its own flows and a rule set switch keeps the table of every kept rule. A new flow in a
 * full table takes the least recently used entry (the kernel's LRU choice); if the table
 * refuses the insert, the packet gets the rule's overflow action. The LRU evicts silently, so
 * the program counts the flows it creates (sl_slot_counters.flows_created) and user space
 * derives flows_evicted = flows created - flows in the table (the loader itself never deletes
 * a flow from a kept rule's table).
 *
 * A rule keyed by one address has its table in sl_addr_flow_tables (a shorter key: struct
 * sl_addr_flow_key), any other keyed rule in sl_flow_tables; the slot of the other is empty.
 *
 * Key: the flow key words of the rule's key mode, laid out as the core's FlowKey
 * (flow_key.hpp): w[0] = mode | IP version << 8 | prefix bits << 16 | proto << 24 | src port
 * << 32 | dst port << 48; IPv4 w[1] = src | dst << 32; IPv6 w[1..2] src, w[3..4] dst
 * (addresses as loaded little-endian from the wire); unused words zero.
 */
#define SL_FLOW_KEY_WORDS 5
struct sl_flow_key {
  sl_u64 w[SL_FLOW_KEY_WORDS];
};

/* The key of a rule keyed by one address (src-ip, dst-ip, src-prefix/N, dst-prefix/N), in a
 * table of sl_addr_flow_tables: w[0] as above, w[1..2] the address (IPv4: w[1]'s low 32 bits,
 * w[2] zero). 24 bytes instead of 40 for the kernel to hash and compare per packet. */
#define SL_ADDR_FLOW_KEY_WORDS 3
struct sl_addr_flow_key {
  sl_u64 w[SL_ADDR_FLOW_KEY_WORDS];
};

/* 1 if a rule of key mode `mode` keys its flows by one address (struct sl_addr_flow_key). */
static inline int sl_addr_key_mode(unsigned mode) {
  return mode == SL_KEY_SRC_IP || mode == SL_KEY_DST_IP || mode == SL_KEY_SRC_PREFIX ||
         mode == SL_KEY_DST_PREFIX;
}

/* A bucket (value of a flow table, and of sl_aggregates by state slot). */
struct sl_bucket {
  sl_u64 seq;                /* 0: never initialised; odd: a writer is inside (see above) */
  sl_u64 w0;                 /* the bucket word; meters: sl_meter_state.e0 */
  sl_u64 w1;                 /* meters: sl_meter_state.e1 */
  sl_u64 last_seen_ns;       /* flows: the last packet's now_ns, for the idle timeout */
  sl_u64 gen;                /* the rule generation whose profiles wrote w0, w1 */
  /* Flows: the packets and frame bytes charged to it since it was created (its restarts after
   * an idle time keep them), read twice by `sluicectl flows top` for rates. Plain adds, not
   * atomic: a ranking tolerates the rare update another CPU's add overwrites. */
  sl_u64 packets;
  sl_u64 bytes;
};

/* Map sl_rules_text, key 0: the running rule set as a rules file (dump_rules_yaml), written
 * by the loader after each switch, so that a later process opening the pinned maps (sluicectl
 * --xdp) knows the names and fields the state slots belong to. Not read by the program. */
#define SL_XDP_RULES_TEXT_MAX ((1u << 20) - 8)
struct sl_rules_text {
  sl_u32 len;
  sl_u32 reserved;
  char text[SL_XDP_RULES_TEXT_MAX];
};

/* Map sl_counters (per-CPU array), key = state slot or SL_XDP_DEFAULT_SLOT: the slot's packets
 * and bytes per outcome (enum sl_outcome), all in one value so that a packet looks its slot up
 * once whatever outcomes it counts (matched, conformed and passed share the first cache line);
 * user space sums the CPUs. */
struct sl_counter {
  sl_u64 packets;
  sl_u64 bytes;
};
struct sl_slot_counters {
  struct sl_counter outcome[SL_OUTCOME_COUNT];
  sl_u64 flows_created; /* flows inserted into the slot's flow table ("Flow tables") */
  sl_u64 reserved;
};

#endif /* SLUICE_ABI_SLUICE_ABI_H */

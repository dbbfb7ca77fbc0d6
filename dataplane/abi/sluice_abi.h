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
 * kernel refused a spin lock in an LRU hash value, where flows were first kept (only hash,
 * array and local-storage maps may hold one; flows are in arrays now, a lock was not tried
 * since). So a bucket has a sequence word instead: a writer decides on (w0, w1) read under an even sequence s, claims
 * the bucket with one CAS s -> s+1 (which fails if anyone published since), stores both words
 * and releases with s+2; a decision that changes nothing just re-checks s. That is a 16-byte
 * compare-and-swap made of a 64-bit one, lock-free for readers; it relies on loads not being
 * reordered with loads (x86-64, the only JIT this project targets). The same claim guards a
 * bucket's first initialisation (sequence 0: an aggregate starts full at its first packet's
 * time, which only that packet knows). A flow's bucket is initialised while its tag word holds
 * the claim (pending), which no other packet matches.
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
  /* User space only: a state's flow hash seed is hash_base + its id, ids numbered from 0 in
   * the order states are made (the core's RuleState::hash_seed), so a table holds its flows
   * where the core's would. */
  sl_u64 hash_base;
  sl_u64 next_state_id;
};

/* Map sl_banks, key = bank: what belongs to a rule set besides its rules and tables. */
struct sl_xdp_bank {
  sl_u32 rule_count;
  struct sl_action_entry default_action;
  sl_u16 field_mask; /* enum sl_field_bit */
};

/*
 * Flow tables. Every keyed rule has a table of its own (as on the DPDK backend), created by
 * the loader when the rule gets its state slot and held in sl_flow_tables (an array of maps)
 * at that slot, so one rule's flood evicts only its own flows and a rule set switch keeps the
 * table of every kept rule.
 *
 * A table is the core's lock-free set-associative FlowTable (dataplane/core/flow_table.hpp,
 * flow_eviction.hpp) in a BPF_MAP_TYPE_ARRAY: element i is set i (struct sl_flow_set), 8 ways
 * of a tag word each, then the 8 ways' buckets and keys. The same geometry (sets from
 * FlowTable::geometry: SL_FT_SLACK slots per flow of capacity), the same seeded hash of the
 * same key words (hash_flow_key, with the rule's seed: sl_xdp_config "hash_base" + the state's
 * id, as the core numbers its states), the same two candidate sets, tag words, ticks, claim by
 * compare-and-swap, capacity count and seen-once eviction preference: a trace replayed on one
 * CPU leaves both tables with the same flows in the same slots, the same evictions and the
 * same refusals (the rule's overflow action). Array-map lookups need no hashing by the kernel,
 * and a flow's lookup reads one tag line and its bucket's line. A dense table (sl_flow_meta
 * "dense") is the core's dense FlowTable: the key's offset in the match's prefix is its slot.
 *
 * Why an array of per-rule arrays, not one big array with per-rule offsets: each rule's table
 * is made, kept and freed with the rule (a rule set switch keeps a kept rule's table as it is,
 * a removed rule's memory goes back), and nothing has to be sized for every future rule set at
 * load. The cost is that the kernel does not inline lookups in an inner array of its own size
 * (BPF_F_INNER_MAP: one direct call per set looked up instead of a few instructions). The
 * tables are BPF_F_MMAPABLE, so user space reads them (flows top, stats) and converts their
 * buckets (a rate change) in place, word by word, without copying a 1 KB set over the program's
 * concurrent updates of the set's other ways.
 *
 * The program sweeps as the core's expiry does, but driven by new flows instead of a timer:
 * every flow claim first frees the idle-expired flows of one set (sl_flow_meta.cursor, moving
 * round the table), so capacity held by expired flows comes back as new flows need it.
 *
 * Key: the flow key words of the rule's key mode, laid out as the core's FlowKey
 * (flow_key.hpp): w[0] = mode | IP version << 8 | prefix bits << 16 | proto << 24 | src port
 * << 32 | dst port << 48; IPv4 w[1] = src | dst << 32; IPv6 w[1..2] src, w[3..4] dst
 * (addresses as loaded little-endian from the wire); unused words zero. As in the core, a flow
 * is found by its 38-bit fingerprint in its two candidate sets; the key is stored beside it for
 * user space only.
 */
#define SL_FLOW_KEY_WORDS 5
struct sl_flow_key {
  sl_u64 w[SL_FLOW_KEY_WORDS];
};

/* The core's hash constants (flow_key.hpp kHashS0..2; sluice_abi.hpp checks them) and the
 * second set's multiplier (FlowTable::second_set_of; the first set is the hash's own
 * fastrange, FlowTable::set_of). */
#define SL_HASH_S0 0xa0761d6478bd642full
#define SL_HASH_S1 0xe7037ed1a0b428dbull
#define SL_HASH_S2 0x8ebc6af09c88c6e3ull
#define SL_FT_SET_MUL2 0xd6e8feb86659fd93ull

/* The core's tag word (flow_table.hpp): bit 63 pending | 38-bit fingerprint (62..25) | bit 24
 * seen once | 24-bit last-seen tick (23..0); 0 is an empty slot. */
#define SL_FT_WAYS 8
#define SL_FT_SLACK 2
#define SL_FT_TICK_BITS 24
#define SL_FT_TICK_MASK ((1ull << SL_FT_TICK_BITS) - 1)
#define SL_FT_SEEN_ONCE (1ull << SL_FT_TICK_BITS)
#define SL_FT_LIFE_MASK (SL_FT_TICK_MASK | SL_FT_SEEN_ONCE)
#define SL_FT_FP_BITS 38
#define SL_FT_FP_SHIFT (SL_FT_TICK_BITS + 1)
#define SL_FT_PENDING (1ull << 63)
#define SL_FT_MAX_IDLE_TICKS ((1u << (SL_FT_TICK_BITS - 1)) - 1)
#define SL_FT_MAX_TIMEOUT_TICKS (1u << 22)
/* A new flow goes to its first set while that has this many empty ways (FlowTable::claim). */
#define SL_FT_KEEP_FIRST_EMPTIES 2
/* The core's min-evict-idle for rule tables (rules_snapshot.cpp): 1 ms. */
#define SL_FT_MIN_EVICT_IDLE_NS 1000000ull

/* Bytes of a set (struct sl_flow_set): 4 sets a page. */
#define SL_FT_SET_BYTES 1024

/* A bucket (value of a flow table, and of sl_aggregates by state slot). */
struct sl_bucket {
  sl_u64 seq;                /* 0: never initialised; odd: a writer is inside (see above) */
  sl_u64 w0;                 /* the bucket word; meters: sl_meter_state.e0 */
  sl_u64 w1;                 /* meters: sl_meter_state.e1 */
  sl_u64 last_seen_ns;       /* flows: the last packet's now_ns (stats' active flows) */
  sl_u64 gen;                /* the rule generation whose profiles wrote w0, w1 */
  /* Flows: the packets and frame bytes charged to it since it was created, read twice by
   * `sluicectl flows top` for rates. Plain adds, not atomic: a ranking tolerates the rare
   * update another CPU's add overwrites. */
  sl_u64 packets;
  sl_u64 bytes;
};

/* One set of a flow table (an element of its array; 1 KB, so a set never straddles a page):
 * the tag line, then each way's bucket line, then the keys, which only user space reads. */
struct sl_flow_slot {
  struct sl_bucket b;
  sl_u64 reserved; /* to a cache line */
};
struct sl_flow_set {
  sl_u64 tag[SL_FT_WAYS];
  struct sl_flow_slot slot[SL_FT_WAYS];
  struct sl_flow_key key[SL_FT_WAYS];
  sl_u8 reserved[SL_FT_SET_BYTES - 8 * SL_FT_WAYS - 64 * SL_FT_WAYS - 40 * SL_FT_WAYS];
};

/* Map sl_flow_meta, key = state slot: a flow table's numbers (written by the loader with the
 * table; FlowTable::geometry) and its counts (written by the program). */
struct sl_flow_meta {
  /* line 0, read by every packet of the rule */
  sl_u64 k0, k1, k2;       /* flow_hash_keys(the state's seed) */
  sl_u64 sets;             /* elements of the table */
  sl_u64 capacity;         /* max-flows */
  sl_u32 tick_shift;       /* tick = now_ns >> tick_shift (mod 2^24) */
  sl_u32 expire_ticks;     /* idle ticks at which a flow has certainly expired */
  sl_u32 evict_ticks;      /* idle ticks at which a flow may be evicted */
  sl_u32 protect_ticks;    /* idle ticks at which a flow seen twice is on probation again */
  /* A dense table (the core's DenseKey, dense_key.hpp): the rule's match pins its keyed IPv4
   * address to a prefix whose 2^dense_bits keys fit capacity, and key k (the address in host
   * order minus dense_base, shifted right by dense_shift) is slot k: way k % 8 of set k / 8,
   * fingerprint k + 1. No hash and no second set, so k0..k2 go unused. dense 0: hashed. */
  sl_u32 dense_base;
  sl_u8 dense;
  sl_u8 dense_src;         /* keyed by the source address (else the destination) */
  sl_u8 dense_shift;       /* 32 - the key's bits of the address */
  sl_u8 dense_bits;        /* log2 of the keys */
  /* line 1, written as flows come and go */
  sl_u64 active;           /* slots held: live, expired not yet swept, being claimed */
  sl_u64 evicted;          /* live flows pushed out by a new flow (SPEC §5 flows_evicted) */
  sl_u64 cursor;           /* the next set the claim-driven sweep visits */
  sl_u64 reserved[5];
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
};

#endif /* SLUICE_ABI_SLUICE_ABI_H */

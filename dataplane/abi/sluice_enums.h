/*
 * The enums both backends share (rules.hpp and counters.hpp define their C++ enums from these,
 * the XDP program and its maps use them directly). Plain C11, no includes: values cross the
 * kernel/user boundary in BPF maps, so each one is spelled out and never reordered.
 */
#ifndef SLUICE_ABI_SLUICE_ENUMS_H
#define SLUICE_ABI_SLUICE_ENUMS_H

/* SPEC §2 `key`. The value is also the low byte of a flow key's first word (flow_key.hpp). */
enum sl_key_mode {
  SL_KEY_NONE = 0,
  SL_KEY_SRC_IP = 1,
  SL_KEY_DST_IP = 2,
  SL_KEY_SRC_DST = 3,
  SL_KEY_FIVE_TUPLE = 4,
  SL_KEY_SRC_PREFIX = 5,
  SL_KEY_DST_PREFIX = 6
};

enum sl_algorithm {
  SL_ALG_TOKEN_BUCKET = 0,
  SL_ALG_GCRA = 1,
  SL_ALG_LEAKY_BUCKET = 2,
  SL_ALG_SRTCM = 3,
  SL_ALG_TRTCM = 4,
  SL_ALG_SLIDING_WINDOW = 5,
  SL_ALG_FIXED_WINDOW = 6
};

enum sl_action_kind { SL_ACT_PASS = 0, SL_ACT_DROP = 1, SL_ACT_MARK_DSCP = 2 };

enum sl_cost_unit { SL_COST_PACKETS = 0, SL_COST_BYTES = 1 };

/* Counted outcomes (SPEC §5), in the order of the per-rule counter arrays. */
enum sl_outcome {
  SL_OUTCOME_MATCHED = 0,
  SL_OUTCOME_CONFORMED = 1,
  SL_OUTCOME_EXCEEDED = 2,
  SL_OUTCOME_PASSED = 3,
  SL_OUTCOME_DROPPED = 4,
  SL_OUTCOME_MARKED = 5,
  SL_OUTCOME_DELAYED = 6,
  SL_OUTCOME_MALFORMED = 7,
  SL_OUTCOME_GREEN = 8,
  SL_OUTCOME_YELLOW = 9,
  SL_OUTCOME_RED = 10,
  SL_OUTCOME_COUNT = 11
};

#endif /* SLUICE_ABI_SLUICE_ENUMS_H */

// Loads the shared match tables (dataplane/core/match_tables.hpp) of a rule set into one bank
// of the XDP program's classification maps (sluice_abi.h "Rule changes"; layout described in
// sluice.bpf.c).
#pragma once

#include <cstdint>
#include <vector>

#include "../dataplane/core/match_tables.hpp"
#include "../dataplane/core/result.hpp"
#include "../dataplane/core/rules.hpp"

struct sluice_bpf;

namespace sluice::xdp {

// Replaces bank `bank` of every classification map with the tables of `rules` (at most
// SL_XDP_MAX_RULES; the caller checks) and returns the bank's field mask. The other bank is
// not touched, so the program may be reading it meanwhile.
Result<uint16_t> fill_match_maps(sluice_bpf* skel, const std::vector<Rule>& rules, uint32_t bank);

// The fields some rule constrains (sl_field_bit): a field whose every table entry holds every
// rule is left out, and the program skips its lookup. Pure.
uint16_t used_fields(const MatchTables& mt);

}  // namespace sluice::xdp

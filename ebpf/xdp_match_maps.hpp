// Loads the shared match tables (dataplane/core/match_tables.hpp) of a rule set into the XDP
// program's classification maps (sluice_abi.h; layout described in sluice.bpf.c).
#pragma once

#include <vector>

#include "../dataplane/core/result.hpp"
#include "../dataplane/core/rules.hpp"

struct sluice_bpf;

namespace sluice::xdp {

// Replaces every classification map's contents with the tables of `rules` (at most
// SL_XDP_MAX_RULES; the caller checks).
Status fill_match_maps(sluice_bpf* skel, const std::vector<Rule>& rules);

}  // namespace sluice::xdp

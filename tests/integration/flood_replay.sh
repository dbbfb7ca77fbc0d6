#!/usr/bin/env bash
# flood_replay: the CI run of scripts/flood.sh (issue 13, item 4): 1M distinct flows (one
# packet each, 100 kpps capture time) and 1,000 established flows at 10 pps through one
# per-src rule of 100k flows in sluiced --replay. Checks: resident <= capacity, flows_evicted
# == flows inserted - resident exactly, every established flow keeps its bucket (flows seen
# twice and sending are never evicted, flow_eviction.hpp; plain LRU of the candidate sets kept
# 975-983 of 1,000: docs/SOAK.md), RSS under the one-flow baseline + table + 8 MiB and flat
# (1%) once the table is full. ~140 MB of trace under /tmp, removed at exit; ~35 s.
# Exit: 0 pass, 1 fail.
set -euo pipefail
export FLOOD_PPS=${FLOOD_PPS:-100000} FLOOD_MIN_SURVIVORS=${FLOOD_MIN_SURVIVORS:-1}
exec bash "$(dirname "$0")/../../scripts/flood.sh" replay 1000000

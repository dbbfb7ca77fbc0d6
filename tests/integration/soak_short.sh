#!/usr/bin/env bash
# soak_short: the CI run of scripts/soak.sh (issue 13, item 5): 1 minute of a live sluiced with
# 2 workers under 20 kpps, a rule change every 10 ms, a scrape and a `stats --json` every
# 100 ms; the first 20 s are the warm-up, fds and RSS must then stay flat to the end, no mbuf
# leaks, every packet is accounted for and every counter is monotone. ~70 s in all.
# The recorded 10-minute run: docs/SOAK.md. Exit: 0 pass, 1 fail, 77 skip.
set -euo pipefail
SOAK_WARMUP_S=${SOAK_WARMUP_S:-20} exec bash "$(dirname "$0")/../../scripts/soak.sh" 1

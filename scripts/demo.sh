#!/usr/bin/env bash
# sluice demo: generates a small trace with flows below and above the limits of
# examples/rules.yaml, runs it through `sluiced --replay` (the same parse -> classify ->
# limit -> shape code as the live dataplane, with capture timestamps as the clock) and
# prints the per-rule counters. Needs no NIC, no hugepages, no root.
#
#   scripts/demo.sh [RULES.yaml]      (BUILD=dir to use another build directory)
set -euo pipefail

cd "$(dirname "$0")/.."
RULES=${1:-examples/rules.yaml}
BUILD=${BUILD:-build}

if [[ -f scripts/setup-deps.sh ]]; then
  bash scripts/setup-deps.sh
fi
if [[ ! -f "$BUILD/build.ninja" ]]; then
  meson setup "$BUILD" >/dev/null
fi
ninja -C "$BUILD" dataplane/sluiced tools/sluice-tracegen >/dev/null

SLUICED="$BUILD/dataplane/sluiced"
TRACEGEN="$BUILD/tools/sluice-tracegen"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Two seconds of traffic, four kinds of flows.
gen() { "$TRACEGEN" --packets "$1" --pps "$2" --start-ns 1000000000 "${@:3}"; }
gen 800  400  --flows 8 --src-base 10.2.0.1 --dst-port 53 --out "$TMP/dns-ok.pcap"     # 50/s per source
gen 2000 1000 --flows 2 --src-base 10.3.0.1 --dst-port 53 --out "$TMP/dns-flood.pcap"  # 500/s per source
gen 1600 800  --proto tcp --src-base 10.4.0.1 --dst-port 80 --size 128 \
    --malformed-every 100 --out "$TMP/web.pcap"                                        # 800/s, some broken
gen 1500 750  --flows 4 --src-base 10.1.0.1 --dst-port 5000 --size 1000 --poisson \
    --out "$TMP/tenant.pcap"                                                           # ~6 Mbit/s
"$TRACEGEN" --out "$TMP/in.pcap" --merge "$TMP/dns-ok.pcap" --merge "$TMP/dns-flood.pcap" \
    --merge "$TMP/web.pcap" --merge "$TMP/tenant.pcap"

echo "== rules: $RULES"
echo "== traffic: 8 DNS sources at 50/s (under the limit), 2 at 500/s (over it),"
echo "   web at 800/s (over 500/s, 1% malformed), tenant A at ~6 Mbit/s (shaped to 4 Mbit/s)"
echo
"$SLUICED" --replay "$TMP/in.pcap" --out "$TMP/out.pcap" --report "$TMP/report.json" \
    --config "$RULES" --hash-seed 1 --stats
echo
echo "(REPORT.json has the same counters, in packets and bytes; OUT.pcap the packets that left,"
echo " shaped ones stamped with their departure time.)"

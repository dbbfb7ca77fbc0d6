#!/usr/bin/env bash
# The XDP backend's benchmark (issue 12 item 7; scripts/bench.sh xdp runs it), as markdown:
#
#   scripts/bench_xdp.sh [--build DIR] [--flows 1,1000,1000000] [--seconds S] [--no-live]
#
# 1. ns/packet through BPF_PROG_TEST_RUN (bench/xdp/sluice-bench-xdp; see its header for the
#    method) at each flow count, side by side in one run: a bare XDP_PASS program, a naive
#    hash-map token bucket (one lookup, bpf_ktime_get_ns, no atomics), the memory floor of a
#    per-flow array as large as sluice's flow table (array_probe.bpf.c: one lookup, one line,
#    no clock), sluice with no rules and sluice with a per-source token bucket.
# 2. Live: frames/s that reach the XDP program on the receiving end of a veth pair between two
#    namespaces this script creates (tests/integration/lib.sh), from tools/sluice-sender (as
#    fast as it can, 1000 flows, 64-byte frames) for S seconds: a bare counting XDP_DROP
#    program (bench/xdp/drop.bpf.c, in place of `xdp-bench drop`, which this kernel refuses:
#    its object needs a tracepoint BTF type the kernel lacks), then sluice with a per-source
#    token bucket that drops nearly every frame; native and skb modes.
# Root. Targets: <= 2x XDP_PASS at 1k flows, <= 200 ns at 1M flows (issue 12).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build-bench}
FLOWS=1,1000,1000000
SECONDS_LIVE=5
LIVE=1
while (($#)); do
  case $1 in
    --build) BUILD=${2:?}; shift 2 ;;
    --flows) FLOWS=${2:?}; shift 2 ;;
    --seconds) SECONDS_LIVE=${2:?}; shift 2 ;;
    --no-live) LIVE=0; shift ;;
    *) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/lib/bench_common.sh
source scripts/lib/bench_common.sh
bench_build "$BUILD" bench/xdp/sluice-bench-xdp tools/sluice-sender
BENCH=$BUILD/bench/xdp/sluice-bench-xdp
SENDER=$BUILD/tools/sluice-sender

# shellcheck source=tests/integration/lib.sh
source tests/integration/lib.sh
it_init bench_xdp

echo "Command: \`scripts/bench_xdp.sh --flows $FLOWS --seconds $SECONDS_LIVE\` (build $BUILD)"
echo
echo "- machine: $(nproc) CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "BPF_PROG_TEST_RUN, one call per 64-byte frame (repeat 1), frames cycling over the flows;"
echo "median of 3 passes of max(300k, flows) frames after a warm-up pass:"
echo
"$BENCH" --flows "$FLOWS"
echo
echo "- load average after the test runs: $(cut -d' ' -f1-3 /proc/loadavg)"
((LIVE)) || exit 0

# live: sender in namespace a, the program on the veth end in namespace b
A="sl-xa-$IT_ID" B="sl-xb-$IT_ID"
it_netns_veth "xa$IT_ID" "$A" "xb$IT_ID" "$B"
echo
echo "Live, veth pair between two namespaces, sluice-sender at full speed (1000 flows, 64-byte"
echo "frames, ${SECONDS_LIVE} s); frames/s the receiving XDP program saw:"
echo
echo "| program | mode | sender Mpps | received Mpps | load average |"
echo "|---|---|---:|---:|---|"
for mode in native skb; do
  for program in drop sluice; do
    ip netns exec "$B" "$BENCH" --attach "xb$IT_ID" --program "$program" --mode "$mode" \
      --seconds $((SECONDS_LIVE + 2)) >"$IT_DIR/seen" &
    seen_pid=$!
    IT_PIDS+=("$seen_pid")
    sleep 1
    sent=$(ip netns exec "$A" "$SENDER" --iface "xa$IT_ID" --pps 20000000 \
      --seconds "$SECONDS_LIVE" --flows 1000 2>/dev/null)
    wait "$seen_pid"
    /usr/bin/python3 - "$program" "$mode" "$sent" "$(cat "$IT_DIR/seen")" "$SECONDS_LIVE" \
      "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
program, mode, sent, seen, seconds, load = sys.argv[1:]
s = json.loads(sent)
name = {"drop": "XDP_DROP floor (drop.bpf.c)", "sluice": "sluice, token-bucket per source"}[program]
print(f"| {name} | {mode} | {s['achieved_pps'] / 1e6:.3f} | "
      f"{int(seen) / float(s['duration_s']) / 1e6:.3f} | {load} |")
PY
  done
done

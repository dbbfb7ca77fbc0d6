#!/usr/bin/env bash
# Rules changed through the control socket of a live, forwarding sluiced (SPEC §4).
#
#   scripts/bench_control.sh [--flows F] [--duration S] [--sluicectl-changes N] [--quick]
#
# The rig of scripts/bench_dataplane.sh with 2 workers: EAL on hugepages, `--vdev
# net_pcap0,rx_pcap=Q0,rx_pcap=Q1,infinite_rx=1` (a 64-byte UDP trace of F flows, default
# 1000, split in two flow halves, one RX queue per worker) into `--vdev net_null1,no-rx=1`,
# lcores 0@(0,1),1@0,2@1 (workers pinned to CPUs 0 and 1, the main lcore and the control
# threads float), `--control SOCK`, bench/dataplane/rules.yaml (one per-flow token bucket
# that every packet conforms to). One client (bench/control_storm.cpp) keeps one connection to the
# socket and runs three storms, for S seconds each (default 5):
#   rule.set, 1 rule      `rule.set per-flow rate` back to back (each change converts the
#                         buckets of every flow: the rule keeps its state)
#   (then it loads a 1,000-rule file: per-flow last, 999 rules on ports no packet uses)
#   rule.set, 1,000 rules the same single change with 1,000 rules running
#   config.load           the whole 1,000-rule file, every rule's rate changed by every load
#                         (changes/s = 1,000 x loads/s)
# and two paced ones (a step every 1/rate s instead of back to back; changes/s is then what
# the windows got): rule.set at 1,000/s with 1 rule running (after the first storm), and
# config.load of the 1,000 rules at 10/s (last). Flat out, the storm's own CPU (the client's
# and sluiced's control threads', last column) comes out of the workers' two CPUs on this rig,
# so "during / without" there measures that share as much as the changes' cost to a worker;
# the paced phases show what a steady rate of changes costs, and "Mpps per worker CPU" the
# cost per packet whatever CPU the workers got.
# Within a storm, 0.5 s windows without changes alternate with 0.5 s windows of changes, so
# the forwarding rate with and without changes come from the same stretch of time (the
# machine is shared: others' load moves the rate by tens of percent within seconds).
# Each request waits for its reply; a reply comes after the change runs on every worker
# (Pipeline::apply: one RCU grace period, every worker past the old snapshot), so the
# request-to-reply time is an upper bound of the apply latency; the reply's `applied_us`
# (docs/CONTROL.md) is sluiced's own time from its read of the request to every worker
# running the change, without the client's send and wake-up: the target's measure, per phase.
# Forwarding rate: port 1
# opackets from DPDK telemetry (/ethdev/stats,1) at the start and end of each window; "control
# CPU" is the CPU time of sluiced's threads other than its workers during the windows of
# changes, per request (clock ticks: 10 ms resolution, summed); beside it the same less what
# those threads spend in the windows without changes (nothing is taken or encoded unless
# asked: the idle figure is the wake-ups of an idle sluiced), scaled to the storm's time. On a machine others load,
# the workers do not get their 2 CPUs: the CPU time they got in each kind of window is shown,
# and Mpps per worker CPU compares the cost per packet with and without changes. Then N (default 200)
# `sluicectl --socket SOCK rule set per-flow --rate R` processes, one after another: the
# changes/s an operator's script gets from the CLI (a process and a connection each).
# --quick: 1 s phases, 20 sluicectl runs (a smoke test of the script itself).
#
# Needs root (hugepages: it adds what it needs to nr_hugepages and takes the same number off
# again at exit, and mounts its own hugetlbfs). Prints markdown on stdout, progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
COMMAND="scripts/bench_control.sh $*"

BUILD=${BUILD:-build-bench}
FLOWS=1000
DURATION=5
CTL_CHANGES=200
MIN_PACKETS=32768
TELEMETRY_DIR=/var/run/dpdk
HP_DIR=/sys/kernel/mm/hugepages/hugepages-2048kB

usage() {
  sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --flows) FLOWS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --sluicectl-changes) CTL_CHANGES=$2; shift 2 ;;
    --quick) DURATION=1; CTL_CHANGES=20; shift ;;
    -h|--help) usage ;;
    *) echo "bench_control: unknown argument '$1'" >&2; usage ;;
  esac
done

log() { echo "bench_control: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (hugepages, DPDK)"
[ -d "$HP_DIR" ] || die "no 2 MB hugepage support ($HP_DIR)"

WORK=$(mktemp -d /tmp/sluice-bench-control.XXXXXX)
PREFIX="sluice-bench-control-$$"
SOCK=$WORK/control.sock
CHILD=""
HP_ADDED=0
HUGE_MOUNT=""

cleanup() {
  local rc=$?
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
    kill -INT "$CHILD" 2>/dev/null || true
    sleep 2
    kill -KILL "$CHILD" 2>/dev/null || true
  fi
  if [ -n "$HUGE_MOUNT" ]; then
    umount "$HUGE_MOUNT" 2>/dev/null || log "could not unmount $HUGE_MOUNT"
    rmdir "$HUGE_MOUNT" 2>/dev/null || true
  fi
  if ((HP_ADDED > 0)); then
    # Only what this script added: other benchmarks may hold pages of their own meanwhile.
    local now
    now=$(cat "$HP_DIR/nr_hugepages")
    echo $((now > HP_ADDED ? now - HP_ADDED : 0)) >"$HP_DIR/nr_hugepages" 2>/dev/null ||
      log "could not give back $HP_ADDED hugepages"
  fi
  rm -rf "${TELEMETRY_DIR:?}/$PREFIX" 2>/dev/null || true
  rm -f "$WORK"/*.pcap 2>/dev/null || true
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=scripts/lib/bench_common.sh
source scripts/lib/bench_common.sh
bench_build "$BUILD" dataplane/sluiced control/sluicectl tools/sluice-tracegen \
  bench/sluice-bench-control-storm
SLUICED=$BUILD/dataplane/sluiced
SLUICECTL=$BUILD/control/sluicectl

# ------------------------------------------------------------------------------ trace

PACKETS=$(((MIN_PACKETS + FLOWS - 1) / FLOWS * FLOWS))
log "trace: $FLOWS flows, $PACKETS packets of 64 bytes"
"$BUILD/tools/sluice-tracegen" --out "$WORK/t.rr.pcap" --flows "$FLOWS" --packets "$PACKETS" \
  --size 64 >/dev/null
/usr/bin/python3 bench/dataplane/pcap_shuffle.py "$WORK/t.rr.pcap" "$WORK/t.pcap" --seed 1 \
  --split "$WORK/t"
rm -f "$WORK/t.rr.pcap"
MBUFS=$((PACKETS + 32768))

# ------------------------------------------------------------------------------ hugepages

HP_NEED=$(((MBUFS * 2500 + 2097151) / 2097152 + 64))
HP_FREE=$(cat "$HP_DIR/free_hugepages")
if ((HP_FREE < HP_NEED)); then
  HP_ADDED=$((HP_NEED - HP_FREE))
  before=$(cat "$HP_DIR/nr_hugepages")
  echo $((before + HP_ADDED)) >"$HP_DIR/nr_hugepages"
  got=$(cat "$HP_DIR/nr_hugepages")
  ((got >= before + HP_ADDED)) || { HP_ADDED=$((got - before)); die "the kernel gave $got hugepages, not $((before + HP_ADDED))"; }
fi
HUGE_MOUNT=$WORK/huge
mkdir -p "$HUGE_MOUNT"
mount -t hugetlbfs -o pagesize=2M nodev "$HUGE_MOUNT"
log "hugepages: $HP_NEED x 2 MB wanted, $HP_ADDED added, hugetlbfs at $HUGE_MOUNT"

# ------------------------------------------------------------------------------ run

LOAD_START=$(uptime | sed 's/^ *//')
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
# shellcheck disable=SC2054 # commas belong to the --vdev arguments
"$SLUICED" --lcores '0@(0,1),1@0,2@1' --no-pci --file-prefix "$PREFIX" --huge-dir "$HUGE_MOUNT" \
  --huge-unlink --vdev "net_pcap0,rx_pcap=$WORK/t.q0.pcap,rx_pcap=$WORK/t.q1.pcap,infinite_rx=1" \
  --vdev net_null1,no-rx=1 -- --config bench/dataplane/rules.yaml --flows "$FLOWS" \
  --mbufs "$MBUFS" --control "$SOCK" </dev/null >"$WORK/sluiced.log" 2>&1 &
CHILD=$!
deadline=$((SECONDS + 120))
until [ -S "$SOCK" ] && [ -S "$TELEMETRY_DIR/$PREFIX/dpdk_telemetry.v2" ]; do
  kill -0 "$CHILD" 2>/dev/null || { tail -20 "$WORK/sluiced.log" >&2; die "sluiced exited early"; }
  ((SECONDS < deadline)) || die "sluiced: no control socket after 120 s (log $WORK/sluiced.log)"
  sleep 0.5
done
log "sluiced up (pid $CHILD); load: $LOAD_START"

"$BUILD/bench/sluice-bench-control-storm" "$SOCK" "$TELEMETRY_DIR/$PREFIX/dpdk_telemetry.v2" \
  "$DURATION" "$CHILD" >"$WORK/client.json"

# sluicectl, one process per change.
start=$(date +%s%N)
for ((i = 0; i < CTL_CHANGES; i++)); do
  "$SLUICECTL" --socket "$SOCK" rule set per-flow --rate "$((1 + i % 2))Mpps" >/dev/null
done
end=$(date +%s%N)
LOAD_END=$(uptime | sed 's/^ *//')

kill -INT "$CHILD"
i=0
while kill -0 "$CHILD" 2>/dev/null && ((i < 200)); do sleep 0.1; i=$((i + 1)); done
kill -0 "$CHILD" 2>/dev/null && { log "sluiced did not stop on SIGINT; killing"; kill -KILL "$CHILD"; }
rc=0
wait "$CHILD" || rc=$?
CHILD=""
((rc == 0)) || { tail -20 "$WORK/sluiced.log" >&2; die "sluiced exited with $rc"; }

# ------------------------------------------------------------------------------ markdown

/usr/bin/python3 - "$WORK/client.json" "$CTL_CHANGES" "$start" "$end" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
n, start, end = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
phases = r["phases"]
print("| storm (one client, one connection, each request waits for its reply) | requests "
      "| rule changes/s | **request to every worker** (sluiced's applied_us) p50 / p99 / max "
      "| request to reply (the client's clock) p50 / p99 / max | sluiced control CPU per request "
      "| less the idle windows' (CPU ms/s idle) "
      "| forwarding Mpps without / during | during / without | CPUs the 2 workers got, "
      "without / during | Mpps per worker CPU, during / without "
      "| control + client CPU ms/s, without / during |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for p in phases:
    # Paced phases: the changes/s achieved over the windows (the requested pace if it holds).
    per_s = p["paced_changes_per_s"] if p.get("pace_hz") else p["changes_per_s"]
    print(f"| {p['phase']} | {p['requests']:,} | {per_s:,.0f} "
          f"| {p['applied_p50_us']:,.0f} / **{p['applied_p99_us']:,.0f}** / {p['applied_max_us']:,.0f} us "
          f"| {p['p50_us']:,.0f} / {p['p99_us']:,.0f} / {p['max_us']:,.0f} us "
          f"| {p['control_cpu_ms_per_request']:.2f} ms "
          f"| {p['control_cpu_ms_per_request_net']:.2f} ms ({p['control_cpu_idle_ms_per_s']:.0f}) "
          f"| {p['idle_mpps']:.2f} / {p['storm_mpps']:.2f} "
          f"| **{p['storm_mpps'] / p['idle_mpps']:.3f}x** "
          f"| {p['idle_worker_cpus']:.2f} / {p['storm_worker_cpus']:.2f} "
          f"| **{(p['storm_mpps'] / p['storm_worker_cpus']) / (p['idle_mpps'] / p['idle_worker_cpus']):.3f}x** "
          f"| {p['others_cpu_ms_per_s_idle']:.0f} / {p['others_cpu_ms_per_s_storm']:.0f} |")
secs = (end - start) / 1e9
print()
print(f"- sluicectl, one process and connection per change: {n} `rule set per-flow --rate R` "
      f"in {secs:.2f} s = **{n / secs:,.0f} changes/s** ({secs / n * 1e3:.1f} ms each)")
print(f"- generation after the run: {r['generation']:,} applied changes")
EOF
# sluiced logs, when it stops, how long the changes took to reach every worker (their clocks).
visible=$(grep -o 'rule changes: .*' "$WORK/sluiced.log" || true)
echo "- sluiced at exit, over every change of the run: ${visible:-(no line \"rule changes:\" in its log)}"
served=$(grep -o 'control requests, .*' "$WORK/sluiced.log" | sed 's/^/  - /' || true)
echo "- sluiced at exit, its side of each request by op, over the whole run (sluicectl's included):"
echo "${served:-  - (no line \"control requests, OP:\" in its log)}"
policy=$(grep -o 'control socket threads .*' "$WORK/sluiced.log" || true)
echo "- control threads' scheduling: ${policy:-SCHED_FIFO 1 (granted)}"
echo
echo "- targets (issue 11): >= 100k rule changes/s batched, request to every worker p99 <= 1 ms,"
echo "  forwarding during a storm >= 0.95x without"
echo "- rig: 2 workers (lcores 1@CPU0, 2@CPU1) forwarding net_pcap (infinite_rx, $FLOWS flows,"
echo "  $PACKETS packets of 64 bytes, one flow half per RX queue) into net_null; the control"
echo "  threads share those two CPUs with the busy-polling workers"
echo "- machine: $(nproc) CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
echo "- $DATE; uptime at start: $LOAD_START; at end: $LOAD_END"
echo "- command: \`$COMMAND\` (build: $BUILD, release)"

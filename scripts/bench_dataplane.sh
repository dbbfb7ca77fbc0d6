#!/usr/bin/env bash
# Live dataplane throughput: sluiced beside dpdk-testpmd on the same vdevs and traces.
#
#   scripts/bench_dataplane.sh [--flows "1000 100000 1000000"] [--repetitions N]
#                              [--warmup S] [--duration S] [--no-two-workers]
#                              [--breakdown] [--peers] [--profile] [--burst N] [--no-wait]
#                              [--compare-with SLUICED_B]
#   scripts/bench_dataplane.sh --rules-scale "1 100 1000 10000" [--repetitions N] ...
#
# Every run: EAL on hugepages, `--vdev net_pcap0,rx_pcap=T.pcap,infinite_rx=1` (the whole
# trace preloaded into mbufs and replayed in a loop) into `--vdev net_null1,no-rx=1`, port 0 ->
# port 1, 64-byte UDP frames. Per flow count F a trace of max(F, ~128k) packets in which every
# flow appears equally often, in random order (sluice-tracegen round robin, then shuffled by
# bench/dataplane/pcap_shuffle.py); an entry F:P of --flows asks for exactly P packets instead
# (e.g. 8192:8192, a cache-resident trace of 8k packets from 8k flows). Every trace has
# 0 as the destination MAC's last byte and 256 IPv4 destinations (pcap_shuffle.py
# --peer-fields: what qos_meter reads; no other process looks at them). Processes, one at a
# time, with 1 forwarding lcore:
#   testpmd io       --forward-mode=io (reference: the cost of the vdevs alone)
#   testpmd macswap  --forward-mode=macswap (touches every frame, as sluiced does)
#   sluiced          bench/dataplane/rules.yaml: one per-flow token bucket (key 5-tuple,
#                    1 Mpps, burst 1000: every packet conforms and is forwarded) with
#                    --flows F: capacity for exactly the trace's flows (the table itself has
#                    two slots per flow; its memory is on transparent huge pages)
#   flow floor       sluice-flow-floor --flows F (bench/dataplane/flow_floor.cpp): macswap plus
#                    one write of a 16-byte per-flow slot, no parse, no lookup: the most any
#                    per-flow forwarder can reach here, so floor / macswap bounds the ratio
# and, unless --no-two-workers, the same with 2 forwarding lcores (testpmd --nb-cores=2
# --rxq=2 --txq=2; sluiced 2 workers): the trace split into two disjoint flow halves, one
# net_pcap RX queue each (net_pcap has no RSS; this is the spread RSS would give).
# Rate: port 1 opackets from DPDK telemetry (dpdk-telemetry.py, /ethdev/stats,1), two samples
# --duration s apart (default 5) after --warmup s (default 2), the same way for all processes.
# Runs are interleaved per repetition (default 3); tables show medians (min-max). "CPU" is the
# CPU time all the process's threads got over the interval / its length: a busy-polling lcore
# shows 1.0 unless something else took its CPU (then its Mpps are low for that reason).
# --breakdown: sluiced at the largest F also with bench/dataplane/rules-no-rules.yaml (no
# rule: fixed cost) and rules-aggregate.yaml (key: none: no flow table), 1 worker.
# --peers: per F also, 1 lcore, DPDK's examples/qos_meter (srTCM colour-blind per destination
# with rte_meter; built from Debian dpdk-doc's source into $WORK by
# bench/dataplane/qos_meter_build.sh, which patches only what the vdevs need) and sluiced with
# bench/dataplane/rules-srtcm.yaml, the same work as a rule (one srtcm per destination), and
# with bench/dataplane/rules-srtcm-pinned.yaml, the same rule with the trace's destinations
# pinned by its match (dst: 192.0.2.0/24): a dense flow table, indexed as qos_meter indexes.
# --burst N: packets per RX burst for both, sluiced --burst N and testpmd --burst=N (default
# 32, both programs' default).
# --rules-scale "N...": instead of all the above, sluiced alone (1 worker) with N keyed rules
# (key: src-ip, no max-flows, no --flows: each rule gets the default capacity), the only
# matching rule last, in the three shapes of bench/core_classifier.cpp (prefix, port-range,
# mix; bench/dataplane/rules_scale.py writes them), on a 1,000-flow trace from 192.0.2.0/22
# to port 53 (132,000 packets); Mpps, ns/packet, RSS when packets first flow and at the end
# (and sluiced's "flow tables: ..." line, if it prints one).
# --compare-with SLUICED_B: an A/B of two builds. Right after every 1-worker sluiced run with
# bench/dataplane/rules.yaml, the same run with the sluiced binary SLUICED_B ("sluiced B"), so
# the pair shares the trace, the repetition and the moment; a table gives B / A per pair (on a
# noisy host, read the pairs, not separate medians).
# --no-wait: skip the wait for a quiet machine (a quick check of the script, not a record).
# --profile: afterwards `perf record -e cpu-clock -g` on sluiced (1 worker) at the largest F
# and the top of `perf report`.
#
# The preloaded trace needs one mbuf per packet: both get the same pool, sluiced with
# --mbufs N and testpmd with --total-num-mbufs=N (N = the largest trace + 32768).
# --mbuf-size B: every forwarder's mbufs get a data room of B bytes, headroom included
# (sluiced --mbuf-size, testpmd --mbuf-size, the floor's --mbuf-size, qos_meter patched;
# default 2176, DPDK's). A 10M-packet trace needs ~24 GB of hugepages at the default and
# ~6 GB at 256, which still holds a 64-byte frame in one mbuf.
#
# `scripts/bench.sh dataplane` runs this with --breakdown (and can --write the result).
#
# Hugepages: reserves what the largest trace needs (2 MB pages) and mounts hugetlbfs on a
# temporary directory if none is mounted; both are undone on exit. Needs root.
# Prints markdown on stdout; progress and raw numbers on stderr and in $WORK (kept).
set -euo pipefail
cd "$(dirname "$0")/.."
COMMAND="scripts/bench_dataplane.sh $*"

BUILD=${BUILD:-build-dpbench}
FLOWS="1000 100000 1000000"
REPS=3
WARMUP=2
DURATION=5
TWO_WORKERS=1
BREAKDOWN=0
PEERS=0
RULES_SCALE=""
WAIT=1
PROFILE=0
BURST=32
MBUF_SIZE=2176
MIN_PACKETS=131072
RULES=bench/dataplane/rules.yaml
SLUICED_B=""
TELEMETRY=${DPDK_TELEMETRY:-/usr/bin/dpdk-telemetry.py}
TESTPMD=${DPDK_TESTPMD:-dpdk-testpmd}
HP_DIR=/sys/kernel/mm/hugepages/hugepages-2048kB

usage() {
  sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --flows) FLOWS=$2; shift 2 ;;
    --repetitions) REPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --no-two-workers) TWO_WORKERS=0; shift ;;
    --breakdown) BREAKDOWN=1; shift ;;
    --peers) PEERS=1; shift ;;
    --no-wait) WAIT=0; shift ;;
    --rules-scale) RULES_SCALE=$2; shift 2 ;;
    --profile) PROFILE=1; shift ;;
    --burst) BURST=$2; shift 2 ;;
    --mbuf-size) MBUF_SIZE=$2; shift 2 ;;
    --compare-with) SLUICED_B=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench_dataplane: unknown argument '$1'" >&2; usage ;;
  esac
done

log() { echo "bench_dataplane: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (hugepages, DPDK)"
command -v "$TESTPMD" >/dev/null || die "$TESTPMD not found (Debian: dpdk)"
[ -x "$TELEMETRY" ] || die "$TELEMETRY not found (Debian: dpdk)"
[ -d "$HP_DIR" ] || die "no 2 MB hugepage support ($HP_DIR)"

WORK=$(mktemp -d /tmp/sluice-bench-dataplane.XXXXXX)
PREFIX_BASE="sluice-bench-$$"
RUN_SEQ=0
CHILD=""
HP_PREV=""
HUGE_MOUNT=""
HUGE_DIR=""

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
  if [ -n "$HP_PREV" ]; then
    echo "$HP_PREV" >"$HP_DIR/nr_hugepages" 2>/dev/null || log "could not restore nr_hugepages"
    log "nr_hugepages restored to $(cat "$HP_DIR/nr_hugepages") (was $HP_PREV)"
  fi
  rm -rf /var/run/dpdk/"$PREFIX_BASE"-* 2>/dev/null || true
  rm -f "$WORK"/*.pcap 2>/dev/null || true
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------------------ build

# shellcheck source=scripts/lib/bench_common.sh
source scripts/lib/bench_common.sh
bench_build "$BUILD" dataplane/sluiced tools/sluice-tracegen bench/sluice-flow-floor
SLUICED=$BUILD/dataplane/sluiced
FLOOR=$BUILD/bench/sluice-flow-floor
TRACEGEN=$BUILD/tools/sluice-tracegen

# ------------------------------------------------------------------------------ traces

# FLOWS entries: F (every flow the same number of times, at least MIN_PACKETS in all) or F:P.
declare -A PACKETS=()
TRACES=""
for entry in $FLOWS; do
  f=${entry%%:*}
  if [[ $entry == *:* ]]; then p=${entry#*:}; else p=$(((MIN_PACKETS + f - 1) / f * f)); fi
  [[ $f =~ ^[0-9]+$ && $p =~ ^[0-9]+$ ]] && ((f > 0 && p >= f)) ||
    die "--flows entry '$entry': want F or F:P with P >= F > 0"
  [ -z "${PACKETS[$f]:-}" ] || die "--flows: $f flows given twice"
  PACKETS[$f]=$p
  TRACES="$TRACES $f:$p"
done
FLOWS=$(for entry in $TRACES; do echo "${entry%%:*}"; done | tr '\n' ' ')
[ -n "$RULES_SCALE" ] && FLOWS=""  # its own trace only

# Memory first, before minutes of trace generation: net_pcap infinite_rx=1 holds every trace
# packet in an mbuf (its data room plus ~324 bytes of mbuf header and pool overhead: ~2.4 KB
# at the default data room, whatever the frame size), so 10M packets would need ~24 GB
# there. Refuse what this machine cannot hold.
[[ $MBUF_SIZE =~ ^[0-9]+$ ]] && ((MBUF_SIZE >= 192 && MBUF_SIZE <= 65535)) ||
  die "--mbuf-size $MBUF_SIZE: want 192-65535 bytes"
MBUF_BYTES=$((MBUF_SIZE + 324))
need_packets=$(((MIN_PACKETS + 999) / 1000 * 1000))
for f in $FLOWS; do ((PACKETS[$f] > need_packets)) && need_packets=${PACKETS[$f]}; done
need_mb=$(((need_packets + 32768) * MBUF_BYTES / 1048576 + 384))
avail_mb=$(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) / 1024 + \
  $(cat "$HP_DIR/free_hugepages") * 2))
if ((need_mb * 10 > avail_mb * 8)); then
  die "a trace of $need_packets packets needs ~$need_mb MB of hugepages for its mbufs (one \
mbuf of ~$MBUF_BYTES bytes per packet for net_pcap infinite_rx), more than 80% of the $avail_mb MB \
available (a smaller --mbuf-size, e.g. 256, takes less)"
fi

MAX_PACKETS=0
for f in $FLOWS; do
  p=${PACKETS[$f]}
  ((p > MAX_PACKETS)) && MAX_PACKETS=$p
  log "trace: $f flows, $p packets of 64 bytes"
  "$TRACEGEN" --out "$WORK/f$f.rr.pcap" --flows "$f" --packets "$p" --size 64 >/dev/null
  /usr/bin/python3 bench/dataplane/pcap_shuffle.py "$WORK/f$f.rr.pcap" "$WORK/f$f.pcap" --seed 1 \
    --split "$WORK/f$f" --peer-fields
  rm -f "$WORK/f$f.rr.pcap"
done
SCALE_FLOWS=1000
if [ -n "$RULES_SCALE" ]; then
  p=$(((MIN_PACKETS + SCALE_FLOWS - 1) / SCALE_FLOWS * SCALE_FLOWS))
  ((p > MAX_PACKETS)) && MAX_PACKETS=$p
  log "trace: rules at scale, $SCALE_FLOWS flows from 192.0.2.0/22, $p packets of 64 bytes"
  "$TRACEGEN" --out "$WORK/scale.rr.pcap" --flows "$SCALE_FLOWS" --packets "$p" --size 64 \
    --src-base 192.0.2.0 >/dev/null
  /usr/bin/python3 bench/dataplane/pcap_shuffle.py "$WORK/scale.rr.pcap" "$WORK/scale.pcap" --seed 1
  rm -f "$WORK/scale.rr.pcap"
  for n in $RULES_SCALE; do
    for shape in prefix port-range mix; do
      /usr/bin/python3 bench/dataplane/rules_scale.py "$shape" "$n" "$WORK/scale-$shape-$n.yaml"
    done
  done
fi
# One mbuf per trace packet (net_pcap keeps them), plus rings, caches and bursts in flight.
MBUFS=$((MAX_PACKETS + 32768))
QOS_METER=$WORK/qos_meter/build/qos_meter
if ((PEERS)); then
  log "building DPDK's examples/qos_meter (NB_MBUF $MBUFS) in $WORK/qos_meter"
  bench/dataplane/qos_meter_build.sh "$WORK/qos_meter" "$MBUFS" "$MBUF_SIZE"
fi

# ------------------------------------------------------------------------------ hugepages

# Each mbuf takes its data room plus ~324 bytes of pool memory; plus EAL and ring overhead.
HP_NEED=$(((MBUFS * MBUF_BYTES + 2097151) / 2097152 + 192))
HP_PREV=$(cat "$HP_DIR/nr_hugepages")
HP_FREE=$(cat "$HP_DIR/free_hugepages")
if ((HP_FREE < HP_NEED)); then
  want=$((HP_PREV + HP_NEED - HP_FREE))
  echo "$want" >"$HP_DIR/nr_hugepages"
  got=$(cat "$HP_DIR/nr_hugepages")
  ((got >= want)) || die "asked for $want hugepages of 2 MB, the kernel gave $got"
  log "nr_hugepages $HP_PREV -> $got"
else
  HP_PREV=""  # nothing to restore
fi
HUGE_DIR=$(awk '$3 == "hugetlbfs" && ($4 ~ /pagesize=2M/ || $4 !~ /pagesize=/) {print $2; exit}' /proc/mounts)
if [ -z "$HUGE_DIR" ]; then
  HUGE_MOUNT=$WORK/huge
  mkdir -p "$HUGE_MOUNT"
  mount -t hugetlbfs -o pagesize=2M nodev "$HUGE_MOUNT"
  HUGE_DIR=$HUGE_MOUNT
fi
log "hugepages: $HP_NEED x 2 MB wanted, $(cat "$HP_DIR/free_hugepages") free, hugetlbfs at $HUGE_DIR"

# ------------------------------------------------------------------------------ runs

# Port 1's opackets (or another field) from one telemetry query; empty if not answering.
tele_field() {  # prefix field
  echo "/ethdev/stats,1" | timeout 10 "$TELEMETRY" -f "$1" 2>/dev/null |
    grep -o "\"$2\": [0-9]*" | head -1 | grep -o '[0-9]*$' || true
}
now_s() { date +%s.%N; }
# CPU time (clock ticks) of all threads of a process.
cpu_ticks() {
  cat /proc/"$1"/task/*/stat 2>/dev/null | sed 's/.*) //' | awk '{t += $12 + $13} END {print t + 0}'
}

RESULTS=$WORK/results.csv
echo "flows,workers,kind,rep,mpps,cpu,rss_kib,conform_pct,active_flows,evicted,load1,rss_start_kib,tables" >"$RESULTS"
HZ=$(getconf CLK_TCK)

# run KIND FLOWS WORKERS REP [RULES]: starts one process, measures, stops it, appends a CSV row.
# KIND: io | macswap (testpmd) | sluiced | floor (sluice-flow-floor) | qos_meter (1 worker) |
#   scale (sluiced, 1 worker, RULES on the rules-at-scale trace, default flow capacity)
run() {
  local kind=$1 f=$2 w=$3 rep=$4 rules=${5:-$RULES}
  RUN_SEQ=$((RUN_SEQ + 1))
  local prefix="$PREFIX_BASE-$RUN_SEQ" lcores rx report="$WORK/report-$RUN_SEQ.json"
  local out="$WORK/run-$RUN_SEQ-$kind-f$f-w$w.log"
  if [ "$kind" = qos_meter ]; then
    lcores=(-l 1)  # it refuses more than one lcore; its main lcore forwards
    rx="rx_pcap=$WORK/f$f.pcap"
  elif ((w == 1)); then
    lcores=(-l "0,1")
    rx="rx_pcap=$WORK/f$f.pcap"
    [ "$kind" = scale ] && rx="rx_pcap=$WORK/scale.pcap"
  else
    lcores=(--lcores '0@(0,1),1@0,2@1')  # main lcore floats; workers pinned to CPUs 0 and 1
    rx="rx_pcap=$WORK/f$f.q0.pcap,rx_pcap=$WORK/f$f.q1.pcap"
  fi
  # shellcheck disable=SC2054 # commas belong to the --vdev arguments
  local eal=("${lcores[@]}" --no-pci --file-prefix "$prefix" --huge-dir "$HUGE_DIR" --huge-unlink
             --vdev "net_pcap0,$rx,infinite_rx=1" --vdev net_null1,no-rx=1)
  local load1
  load1=$(cut -d' ' -f1 /proc/loadavg)
  case "$kind" in
    io|macswap)
      "$TESTPMD" "${eal[@]}" -- --no-flush-rx "--forward-mode=$kind" "--total-num-mbufs=$MBUFS" \
        "--mbuf-size=$MBUF_SIZE" "--nb-cores=$w" "--rxq=$w" "--txq=$w" "--burst=$BURST" --stats-period=86400 \
        </dev/null >"$out" 2>&1 &
      ;;
    sluiced|sluiced-b)
      local bin=$SLUICED
      [ "$kind" = sluiced-b ] && bin=$SLUICED_B
      "$bin" "${eal[@]}" -- --config "$rules" --flows "$f" --mbufs "$MBUFS" \
        --mbuf-size "$MBUF_SIZE" --burst "$BURST" --report "$report" </dev/null >"$out" 2>&1 &
      ;;
    floor)
      "$FLOOR" "${eal[@]}" -- --flows "$f" --mbufs "$MBUFS" --mbuf-size "$MBUF_SIZE" \
        --burst "$BURST" </dev/null >"$out" 2>&1 &
      ;;
    scale)
      "$SLUICED" "${eal[@]}" -- --config "$rules" --mbufs "$MBUFS" --mbuf-size "$MBUF_SIZE" \
        --burst "$BURST" --report "$report" </dev/null >"$out" 2>&1 &
      ;;
    qos_meter)  # -p 3: RX port 0, TX port 1; bursts of 32 are compiled in
      "$QOS_METER" "${eal[@]}" -- -p 3 </dev/null >"$out" 2>&1 &
      ;;
  esac
  CHILD=$!
  # Up: telemetry answers and packets flow (net_pcap first loads the whole trace).
  local deadline=$((SECONDS + 120)) o
  while :; do
    kill -0 "$CHILD" 2>/dev/null || { tail -20 "$out" >&2; die "$kind exited early (log $out)"; }
    o=$(tele_field "$prefix" opackets)
    [ -n "$o" ] && [ "$o" -gt 0 ] && break
    ((SECONDS < deadline)) || die "$kind: no packets after 120 s (log $out)"
    sleep 0.5
  done
  local rss_start tables=""
  rss_start=$(awk '/^VmRSS:/ {print $2}' "/proc/$CHILD/status")
  sleep "$WARMUP"
  local o1 t1 o2 t2 rss c1 c2
  o1=$(tele_field "$prefix" opackets); t1=$(now_s); c1=$(cpu_ticks "$CHILD")
  sleep "$DURATION"
  o2=$(tele_field "$prefix" opackets); t2=$(now_s); c2=$(cpu_ticks "$CHILD")
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$CHILD/status")
  if [ "$PROFILE_NOW" = 1 ]; then
    perf record -e cpu-clock -g -p "$CHILD" -o "$WORK/perf.data" -- sleep "$DURATION" \
      >"$WORK/perf-record.log" 2>&1 || log "perf record failed: $(tail -1 "$WORK/perf-record.log")"
  fi
  # qos_meter has no signal handler, and a background job of a script ignores SIGINT.
  if [ "$kind" = qos_meter ]; then kill -TERM "$CHILD"; else kill -INT "$CHILD"; fi
  local i=0
  while kill -0 "$CHILD" 2>/dev/null && ((i < 200)); do sleep 0.1; i=$((i + 1)); done
  kill -0 "$CHILD" 2>/dev/null && { log "$kind did not stop; killing"; kill -KILL "$CHILD"; }
  wait "$CHILD" 2>/dev/null || true
  CHILD=""
  rm -rf "/var/run/dpdk/$prefix"
  local mpps cpu conform="" active="" evicted=""
  mpps=$(/usr/bin/python3 -c "print(f'{($o2 - $o1) / ($t2 - $t1) / 1e6:.3f}')")
  cpu=$(/usr/bin/python3 -c "print(f'{($c2 - $c1) / $HZ / ($t2 - $t1):.2f}')")
  if [ -f "$report" ]; then
    read -r conform active evicted < <(/usr/bin/python3 - "$report" <<'EOF'
import json, sys
rules = json.load(open(sys.argv[1]))["rules"]
if rules:
    r = max(rules, key=lambda r: r["matched_packets"])  # the rule the trace matches
    print(f"{100 * r['conformed_packets'] / max(1, r['matched_packets']):.3f}", r["active_flows"], r["flows_evicted"])
else:
    print()
EOF
) || true
  fi
  local tag=$kind
  [ "$rules" != "$RULES" ] && tag="$kind:$(basename "$rules" .yaml)"
  # "sluiced: flow tables: N MB for M flows (...)", commas out (a CSV field)
  tables=$(grep -o 'flow tables: .*' "$out" | head -1 | tr -d ',' || true)
  echo "$f,$w,$tag,$rep,$mpps,$cpu,$rss,$conform,$active,$evicted,$load1,$rss_start,$tables" >>"$RESULTS"
  log "$(printf '%-12s flows %-8s workers %s rep %s: %7s Mpps  CPU %s  RSS %s KiB  conform %s%%  load %s' \
    "$tag" "$f" "$w" "$rep" "$mpps" "$cpu" "$rss" "${conform:--}" "$load1")"
}

log "load average $(cut -d' ' -f1-3 /proc/loadavg); waiting for a quiet machine"
((WAIT)) && bench_wait_for_quiet bench_dataplane
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
PROFILE_NOW=0
if [ -n "$RULES_SCALE" ]; then
  for rep in $(seq 1 "$REPS"); do
    for n in $RULES_SCALE; do
      for shape in prefix port-range mix; do
        run scale "$SCALE_FLOWS" 1 "$rep" "$WORK/scale-$shape-$n.yaml"
      done
    done
  done
  LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
  /usr/bin/python3 bench/dataplane/rules_scale_table.py "$RESULTS" "$RULES_SCALE"
  cat <<EOF

- command: \`$COMMAND\`, $REPS repetitions of ${DURATION} s after ${WARMUP} s warm-up, bursts of $BURST, runs interleaved
- machine: $(nproc) CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r), DPDK $(pkg-config --modversion libdpdk 2>/dev/null || echo '?')
- date: $DATE; load average at start: $LOAD_START, at end: $LOAD_END
- sluiced: $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-80) (+ working tree)
- raw results: $RESULTS
EOF
  exit 0
fi
KINDS1="io macswap sluiced floor"
if [ -n "$SLUICED_B" ]; then
  [ -x "$SLUICED_B" ] || die "--compare-with: $SLUICED_B is not an executable"
  KINDS1="io macswap sluiced sluiced-b floor"
fi
LARGEST=$(echo "$FLOWS" | tr ' ' '\n' | sort -n | tail -1)
for rep in $(seq 1 "$REPS"); do
  for f in $FLOWS; do
    for kind in $KINDS1; do run "$kind" "$f" 1 "$rep"; done
    if ((PEERS)); then
      run qos_meter "$f" 1 "$rep"
      run sluiced "$f" 1 "$rep" bench/dataplane/rules-srtcm.yaml
      run sluiced "$f" 1 "$rep" bench/dataplane/rules-srtcm-pinned.yaml
    fi
    if ((TWO_WORKERS)); then
      for kind in io macswap sluiced; do run "$kind" "$f" 2 "$rep"; done
    fi
  done
  if ((BREAKDOWN)); then
    run sluiced "$LARGEST" 1 "$rep" bench/dataplane/rules-no-rules.yaml
    run sluiced "$LARGEST" 1 "$rep" bench/dataplane/rules-aggregate.yaml
  fi
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

PROFILE_TOP=""
if ((PROFILE)); then
  if command -v perf >/dev/null; then
    PROFILE_NOW=1
    run sluiced "$LARGEST" 1 profile
    PROFILE_NOW=0
    PROFILE_TOP=$(perf report -i "$WORK/perf.data" --no-children --sort dso,symbol --percent-limit 0.8 \
      --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' | sed 's/ *- *- *$//; s/ *$//' | head -25 || true)
  else
    log "perf not found (Debian: linux-perf): no profile"
  fi
fi

# ------------------------------------------------------------------------------ report

/usr/bin/python3 - "$RESULTS" "$TRACES" "$TWO_WORKERS" "$PEERS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
traces = {int(f): int(p) for f, p in (e.split(":") for e in sys.argv[2].split())}
flows = list(traces)
two = sys.argv[3] == "1"
peers = sys.argv[4] == "1"
largest = max(flows)

def picked(f, w, kind, field="mpps"):  # the measured rows of one process and shape
    return [r for r in rows
            if int(r["flows"]) == f and int(r["workers"]) == w and r["kind"] == kind
            and r["rep"] != "profile" and r[field] != ""]

def vals(f, w, kind, field="mpps"):
    return [float(r[field]) for r in picked(f, w, kind, field)]

def med(v):
    return statistics.median(v) if v else float("nan")

def cell(v):
    if not v:
        return "-"
    return f"{med(v):.2f} ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else f"{v[0]:.2f}"

def cpu(f, w, kind):
    v = vals(f, w, kind, "cpu")
    return f"{med(v):.2f}" if v else "-"

def ratio(a, b):
    return f"**{med(a) / med(b):.2f}x**" if a and b else "-"

def per_cpu(f, w, kind):  # Mpps per CPU the process got, per repetition
    return [float(r["mpps"]) / float(r["cpu"]) for r in picked(f, w, kind, "cpu")
            if float(r["cpu"]) > 0]

def packets(f):
    return traces[f]

print("Mpps forwarded port 0 -> 1 by 1 forwarding lcore, median (min-max); CPU: CPUs the "
      "process got (1.0 = its lcore ran all along):\n")
head = ("| flows | trace packets | testpmd io | testpmd macswap (CPU) | sluiced (CPU) | "
        "sluiced / macswap | flow floor (CPU) | floor / macswap |")
sep = "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
print(head + " sluiced conforming | flows evicted per run |")
print(sep + " ---: | ---: |")
for f in flows:
    io, ms, sl = vals(f, 1, "io"), vals(f, 1, "macswap"), vals(f, 1, "sluiced")
    fl = vals(f, 1, "floor")
    conf = vals(f, 1, "sluiced", "conform_pct")
    line = (f"| {f:,} | {packets(f):,} | {cell(io)} | {cell(ms)} ({cpu(f, 1, 'macswap')}) | "
            f"{cell(sl)} ({cpu(f, 1, 'sluiced')}) | {ratio(sl, ms)} | "
            f"{cell(fl)} ({cpu(f, 1, 'floor')}) | {ratio(fl, ms)} |")
    ev = vals(f, 1, "sluiced", "evicted")
    line += f" {med(conf):.2f}% |" if conf else " - |"
    print(line + (f" {med(ev):,.0f} |" if ev else " - |"))
if any(r["kind"] == "sluiced-b" for r in rows):
    def by_rep(f, kind):
        return {r["rep"]: float(r["mpps"]) for r in picked(f, 1, kind)}
    print("\nA/B (--compare-with): sluiced A (this tree's build) and B, one after the other in "
          "each repetition; B / A per pair, and each one's median against the floor's:\n")
    print("| flows | A Mpps | B Mpps | B / A per pair | **B / A median** | A / floor | B / floor | B conforming |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for f in flows:
        a, b = by_rep(f, "sluiced"), by_rep(f, "sluiced-b")
        pairs = [b[k] / a[k] for k in sorted(set(a) & set(b), key=int)]
        va, vb, fl = list(a.values()), list(b.values()), vals(f, 1, "floor")
        conf = vals(f, 1, "sluiced-b", "conform_pct")
        print(f"| {f:,} | {cell(va)} | {cell(vb)} | {', '.join(f'{x:.2f}' for x in pairs)} | "
              f"**{med(pairs):.2f}** | {ratio(va, fl)} | {ratio(vb, fl)} | "
              + (f"{med(conf):.2f}% |" if conf else "- |"))
if peers:
    print("\nBeside DPDK's examples/qos_meter (srTCM colour-blind per destination with rte_meter, "
          "256 destinations, output colour written into every frame), 1 forwarding lcore, same "
          "runs and traces as above; sluiced srtcm: bench/dataplane/rules-srtcm.yaml (one srtcm "
          "per destination, qos_meter's CIR/CBS/EBS). The last column divides each process's "
          "Mpps by the CPUs it got (on a shared machine a busy-polling lcore may get less than "
          "one):\n")
    print("| flows | trace packets | testpmd macswap | flow floor | qos_meter (CPU) | "
          "sluiced srtcm per destination (CPU) | **sluiced srtcm / qos_meter** | "
          "qos_meter / macswap | sluiced token bucket per 5-tuple | sluiced token bucket / floor "
          "| sluiced srtcm green | sluiced srtcm / qos_meter, Mpps per CPU |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    pinned_rows = []
    for f in flows:
        ms, fl, sl = vals(f, 1, "macswap"), vals(f, 1, "floor"), vals(f, 1, "sluiced")
        qm, sr = vals(f, 1, "qos_meter"), vals(f, 1, "sluiced:rules-srtcm")
        green = vals(f, 1, "sluiced:rules-srtcm", "conform_pct")
        print(f"| {f:,} | {packets(f):,} | {cell(ms)} | {cell(fl)} | {cell(qm)} "
              f"({cpu(f, 1, 'qos_meter')}) | {cell(sr)} ({cpu(f, 1, 'sluiced:rules-srtcm')}) | "
              f"{ratio(sr, qm)} | {ratio(qm, ms).strip('*')} | {cell(sl)} | "
              f"{ratio(sl, fl).strip('*')} | {f'{med(green):.2f}%' if green else '-'} | "
              f"{ratio(per_cpu(f, 1, 'sluiced:rules-srtcm'), per_cpu(f, 1, 'qos_meter')).strip('*')} |")
        pn = vals(f, 1, "sluiced:rules-srtcm-pinned")
        if pn:
            pinned_rows.append(
                f"| {f:,} | {packets(f):,} | {cell(qm)} ({cpu(f, 1, 'qos_meter')}) | {cell(sr)} | "
                f"{cell(pn)} ({cpu(f, 1, 'sluiced:rules-srtcm-pinned')}) | {ratio(pn, qm)} | "
                f"{ratio(per_cpu(f, 1, 'sluiced:rules-srtcm-pinned'), per_cpu(f, 1, 'qos_meter')).strip('*')} |")
    if pinned_rows:
        print("\nThe same meter with the destinations pinned by the match "
              "(bench/dataplane/rules-srtcm-pinned.yaml, `dst: 192.0.2.0/24`: a dense flow table, "
              "indexed by the address as qos_meter indexes by its last byte):\n")
        print("| flows | trace packets | qos_meter (CPU) | sluiced srtcm per destination | "
              "sluiced srtcm, destinations pinned (CPU) | **pinned / qos_meter** | "
              "pinned / qos_meter, Mpps per CPU |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for row in pinned_rows:
            print(row)
if two:
    print("\nMpps with 2 forwarding lcores (trace split in two flow halves, one RX queue each):\n")
    print("| flows | testpmd io | testpmd macswap (CPU) | sluiced (CPU) | sluiced / macswap | sluiced 2 vs 1 worker |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for f in flows:
        io, ms, sl = vals(f, 2, "io"), vals(f, 2, "macswap"), vals(f, 2, "sluiced")
        print(f"| {f:,} | {cell(io)} | {cell(ms)} ({cpu(f, 2, 'macswap')}) | {cell(sl)} "
              f"({cpu(f, 2, 'sluiced')}) | {ratio(sl, ms)} | "
              f"{ratio(sl, vals(f, 1, 'sluiced')).strip('*')} |")

bd = [(k, d) for k, d in (("sluiced:rules-no-rules", "no rule (default pass): fixed cost"),
                          ("sluiced:rules-aggregate", "key: none, one token bucket"),
                          ("sluiced", "key: 5-tuple, per-flow token bucket (rules.yaml)"))
      if vals(largest, 1, k)]
if len(bd) > 1:
    ms = med(vals(largest, 1, "macswap"))
    print(f"\nWhere sluiced's time goes, {largest:,} flows, 1 worker (ns per packet = 1000 / Mpps; "
          f"testpmd macswap: {1000 / ms:.0f} ns):\n")
    print("| sluiced rules | Mpps | ns/packet | vs macswap |")
    print("| --- | ---: | ---: | ---: |")
    for k, d in bd:
        m = med(vals(largest, 1, k))
        print(f"| {d} | {m:.2f} | {1000 / m:.0f} | {m / ms:.2f}x |")

print("\nMemory per flow: `--flows F` gives each keyed rule a table of 2F slots (sets of 8 ways "
      "in two halves, each a line of 4 tags and their 4 one-word buckets: 128 bytes per set, so "
      "16 bytes per slot and 32 per flow of capacity), allocated and written at start. Process RSS "
      "(VmRSS; the mbufs are on hugepages, not in it), 1 worker:\n")
print("| flows | --flows | table bytes (code) | sluiced RSS MiB | RSS delta / flow vs smallest | testpmd macswap RSS MiB |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
base_f = min(flows)
base_rss = med(vals(base_f, 1, "sluiced", "rss_kib")) * 1024
for f in flows:
    slots = 2 * f
    table = (slots + 7) // 8 * 128
    rss = med(vals(f, 1, "sluiced", "rss_kib")) * 1024
    delta = (f"{(rss - base_rss) / (f - base_f):.1f} B" if f != base_f else "-")
    print(f"| {f:,} | {f:,} | {table / 2**20:.2f} MiB ({table / slots:.0f} B/slot, "
          f"{table / f:.0f} B/flow) | {rss / 2**20:.1f} | {delta} | "
          f"{med(vals(f, 1, 'macswap', 'rss_kib')) / 1024:.1f} |")
EOF

cat <<EOF

- command: \`$COMMAND\`, $REPS repetitions of ${DURATION} s after ${WARMUP} s warm-up, bursts of $BURST
- machine: $(nproc) CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r), DPDK $(pkg-config --modversion libdpdk 2>/dev/null || echo '?')
- date: $DATE; load average at start: $LOAD_START, at end: $LOAD_END
- sluiced: $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-80) (+ working tree)
- raw results: $RESULTS
EOF
if [ -n "$PROFILE_TOP" ]; then
  echo
  echo "perf record -e cpu-clock -g, sluiced 1 worker, $LARGEST flows (self time, top symbols):"
  echo
  echo '```'
  echo "$PROFILE_TOP"
  echo '```'
fi

#!/usr/bin/env bash
# Benchmarks; docs/BENCHMARKS.md records their results.
#
#   scripts/bench.sh core [--repetitions N] [--write]
#   scripts/bench.sh dataplane [--repetitions N] [--write] [-- BENCH_DATAPLANE_OPTIONS...]
#   scripts/bench.sh rules [--repetitions N] [--write]
#   scripts/bench.sh xdp [--write]
#   scripts/bench.sh control [--write]
#   scripts/bench.sh instructions [--write]
#
# core: Google Benchmark (build-bench/bench/sluice-bench-core) of one decision of every core
#   algorithm, on 1 thread and with 2 threads charging one shared bucket, beside a
#   std::mutex token bucket and DPDK's rte_meter srTCM (and trTCM); then the packet rate of
#   `sluiced --replay` on a 1M-packet, 100k-flow trace (best wall time of 3). Prints
#   markdown tables of the medians over N repetitions (default 9).
# dataplane: the live dataplane beside dpdk-testpmd and DPDK's examples/qos_meter: runs
#   `scripts/bench_dataplane.sh --breakdown --peers --flows "8192:8192 1000 100000 1000000"`
#   (see its header: root, hugepages, and its CPUs for tens of minutes; 8192:8192 is the
#   cache-resident trace, 8k packets from 8k flows) on build-bench, with --repetitions N passed
#   on (its default: 3) and anything after "--" appended (e.g. -- --flows "1000 100000"
#   --no-two-workers).
# rules: rules at scale. ns/packet of the classifier (build-bench/bench/sluice-bench-rules) at
#   1, 100, 1,000 and 10,000 rules (prefix, port-range and mixed rules, the matching rule
#   last) beside the linear walk it replaced; then `sluiced --replay` with N keyed (src-ip)
#   rules without max-flows, the match last, over a 2M-packet trace from 1,000 sources: wall
#   time per packet and max RSS (/usr/bin/time -v), and the RSS of a 10-packet run (start-up).
# xdp: the XDP backend: scripts/bench_xdp.sh (see its header: root; BPF_PROG_TEST_RUN at 1,
#   1k and 1M flows beside XDP_PASS and a naive hash-map token bucket, then live on veth).
# control: rules changed through sluiced's control socket while 2 workers forward:
#   scripts/bench_control.sh (see its header: root, hugepages; 1-2 min): rule changes/s
#   (single rule.set and batched config.load of 1,000 rules), request-to-reply latency, and
#   the forwarding rate during each storm against windows without changes. Its options go in
#   BENCH_CONTROL_OPTIONS (e.g. "--quick").
# instructions: instructions per packet of the core's burst path, counted by callgrind on a
#   release build with -g (build-instr): build-instr/bench/sluice-bench-instructions sends a
#   fixed trace (F flows round robin, 64-byte UDP frames) through
#   Pipeline::process_burst(snapshot, ...), the function a live worker calls per burst, and
#   callgrind collects inside that function only. Rows: no rule, a token bucket per 5-tuple
#   and an srTCM meter per destination, at 1k flows (and 100k for the token bucket).
#   Deterministic: the same commit gives the same counts.
# --write: also replaces the generated section of docs/BENCHMARKS.md (between its
#   "bench:MODE" markers) with the tables, the exact command and the machine.
#
# Each mode is a function mode_NAME printing markdown. Both wait (up to 10 min) for the CPUs to
# be idle, then record the load average too.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=build-bench
DATA=$BUILD/bench-data
DOC=docs/BENCHMARKS.md
COMMAND="scripts/bench.sh $*"

usage() {
  sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# shellcheck source=scripts/lib/bench_common.sh
source scripts/lib/bench_common.sh

build() { bench_build "$BUILD" "$@"; }

machine() {
  echo "- machine: $(nproc) CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# ------------------------------------------------------------------------------ core

# Google Benchmark JSON (every repetition) -> markdown: one row per algorithm, 1 and 2
# threads. A repetition of a lock-free benchmark counts only if its threads really ran all
# along (CPU time close to threads x wall time): on a shared machine the 2 threads sometimes
# share one CPU, and then measure no contention at all. The mutex's threads also sleep on
# purpose (futex), so its 2-thread runs all count; "CPUs busy" shows how much they slept.
core_table() {
  /usr/bin/python3 - "$1" <<'EOF'
import json, statistics, sys
reps = {}
benchmarks = json.load(open(sys.argv[1]))["benchmarks"]
for b in sorted(benchmarks, key=lambda b: b["family_index"]):  # in registration order
    if b["run_type"] == "iteration":
        name = b["run_name"]  # "NAME/threads:N"; pipeline rows: "NAME/ARG/threads:N"
        name = name.rsplit("/threads:", 1)[0] if name.startswith("pipeline") else name.split("/")[0]
        reps.setdefault(name, {}).setdefault(b["threads"], []).append(b)

BLOCKING = {"mutex token-bucket", "mutex token-bucket, burst of 32"}

def summary(name, runs):
    kept = [r for r in runs if (r["threads"] > 1 and name in BLOCKING) or
            r["cpu_time"] >= 0.9 * r["threads"] * r["real_time"]]
    use = kept or runs  # none kept: shown, but flagged by its "0/N"
    med = lambda f: statistics.median(f(r) for r in use)
    return {"ips": med(lambda r: r["items_per_second"]), "conform": med(lambda r: r["conform"]),
            "retries": med(lambda r: r.get("retries", 0)),
            "busy": med(lambda r: r["cpu_time"] / r["real_time"]),
            "kept": f"{len(kept)}/{len(runs)}"}

rows = {name: {t: summary(name, r) for t, r in by.items()} for name, by in reps.items()}
# core_pipeline.cpp's rows are per packet of a whole burst pipeline, not per decision.
pipeline = {name: by[1] for name, by in rows.items() if name.startswith("pipeline")}
rows = {name: by for name, by in rows.items() if not name.startswith("pipeline")}

print("| decision | ns/decision, 1 thread | Mdecisions/s, 1 thread "
      "| Mdecisions/s, 2 threads on one bucket | 2 threads / 1 | conforming, 1 / 2 threads "
      "| repetitions kept, 1 / 2 threads | CPUs busy, 2 threads |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
def cells(one, two):
    if one and two:
        yield f"{two['ips'] / one['ips']:.2f}x"
    else:
        yield "–"
    for key, fmt in (("conform", "{:.0%}"), ("kept", "{}")):
        yield " / ".join(fmt.format(r[key]) if r else "–" for r in (one, two) if r or two)
    yield f"{two['busy']:.2f}" if two else "–"

for name, by in rows.items():
    one, two = by.get(1), by.get(2)
    print(f"| {name} | {one and '%.2f' % (1e9 / one['ips']) or '–'} "
          f"| {one and '%.1f' % (one['ips'] / 1e6) or '–'} "
          f"| {two and '%.1f' % (two['ips'] / 1e6) or '–'} | {' | '.join(cells(one, two))} |")

def ips(name, threads):
    return rows.get(name, {}).get(threads, {}).get("ips")

def contended(name):
    """The 2-thread figure of a lock-free row, or None with a note if no repetition had
    both threads running at once."""
    two = rows.get(name, {}).get(2)
    if not two:
        return None, ""
    if two["kept"].startswith("0/"):
        return None, (f"- {name}, 2 threads: **not measured**: in no repetition did both "
                      "threads run at once (the machine was busy); run again on a quiet machine")
    return two["ips"], two["kept"]

print()
# Target (b): two threads contending on one bucket >= 3x the mutex bucket's throughput.
# Per decision (one CAS vs one lock per packet), and per burst (one CAS vs one lock per 32
# packets: the like-for-like comparison for the burst API).
for lockfree, mutex, what in (
        ("token-bucket", "mutex token-bucket", "one decision per update"),
        ("token-bucket, burst of 32", "mutex token-bucket, burst of 32",
         "bursts of 32, one CAS / one lock per burst")):
    lf2, kept = contended(lockfree)
    mx2 = ips(mutex, 2)
    if lf2 is None and kept:
        print(kept)
    elif lf2 and mx2:
        print(f"- 2 threads on one bucket, {what}: lock-free {lf2 / 1e6:.1f} vs mutex "
              f"{mx2 / 1e6:.1f} Mdecisions/s = **{lf2 / mx2:.2f}x** (target >= 3x; "
              f"lock-free repetitions kept: {kept})")
lf2, kept = contended("token-bucket, burst of 32")
mx2 = ips("mutex token-bucket", 2)
if lf2 and mx2:
    print(f"- for reference, not like for like: lock-free bursts of 32 vs the mutex bucket one "
          f"decision per lock = {lf2 / mx2:.2f}x")
# Target (a): a decision no slower than rte_meter srTCM's (single-writer, inlined). Its
# state in memory, as ours is, for every row but the last: state in registers on both sides.
for name, what, peer in (
        ("srtcm, single writer", "single writer (plain store, like rte_meter)", "rte_meter srtcm"),
        ("srtcm", "shared (128-bit CAS per update)", "rte_meter srtcm"),
        ("srtcm, burst of 32", "shared, bursts of 32 (one 128-bit CAS per burst)",
         "rte_meter srtcm"),
        ("srtcm, arithmetic only", "state in registers on both sides",
         "rte_meter srtcm, state in registers")):
    sr, rte = ips(name, 1), ips(peer, 1)
    if sr and rte:
        print(f"- srtcm decision, {what}: sluice {1e9 / sr:.2f} ns vs rte_meter {1e9 / rte:.2f} ns "
              f"= **{sr / rte:.2f}x** rte_meter's speed (target >= 1x)")
# rte_meter's trTCM beside ours, for reference (the issue's target names the srTCM).
for name, what in (("trtcm, single writer", "single writer"),
                   ("trtcm", "shared (128-bit CAS per update)")):
    tr, rte = ips(name, 1), ips("rte_meter trtcm", 1)
    if tr and rte:
        print(f"- for reference, trtcm decision, {what}: sluice {1e9 / tr:.2f} ns vs rte_meter "
              f"trtcm {1e9 / rte:.2f} ns = {tr / rte:.2f}x")
counted = rows.get("token-bucket, inlined CAS loop", {}).get(2)
if counted:
    print(f"- failed compare-and-swaps per decision (token-bucket, 2 threads on one bucket): "
          f"{counted['retries']:.3f}")

if pipeline:
    print()
    print("Pipeline::process_burst, 1 thread (single writer), bursts of 32 64-byte UDP frames "
          "from an in-memory trace (bench/core_pipeline.cpp; no DPDK, no I/O):")
    print()
    print("| rules (bench/dataplane/) | flows | ns/packet | Mpps | conforming |")
    print("|---|--:|--:|--:|--:|")
    def order(name):  # no rule, aggregate, then per-flow by flow count
        rules, _, flows = name.partition("/")
        return (rules.endswith("per-flow"), int(flows.removeprefix("flows:") or 0))
    for name, r in sorted(pipeline.items(), key=lambda kv: order(kv[0])):
        rules, _, flows = name.partition("/")
        flows = flows.removeprefix("flows:")
        shown = f"{int(flows):,}" if rules.endswith("per-flow") else "–"
        print(f"| {rules.removeprefix('pipeline, ')} | {shown} | {1e9 / r['ips']:.1f} "
              f"| {r['ips'] / 1e6:.1f} | {r['conform']:.0%} |")
EOF
}

# Wall time of `sluiced --replay` over a generated trace; best of 3, in Mpps.
replay_table() {
  local packets=1000000 flows=100000
  local trace=$DATA/trace-${packets}p-${flows}f.pcap
  mkdir -p "$DATA"
  if [ ! -f "$trace" ]; then
    "$BUILD/tools/sluice-tracegen" --out "$trace" --packets "$packets" --flows "$flows" \
      --random-flows --pps 1000000 --seed 7
  fi
  local best_ns=0 start end
  for _ in 1 2 3; do
    start=$(date +%s%N)
    "$BUILD/dataplane/sluiced" --replay "$trace" --out "$DATA/replay-out.pcap" \
      --report "$DATA/replay-report.json" --config bench/rules-replay.yaml --hash-seed 1 >&2
    end=$(date +%s%N)
    if ((best_ns == 0 || end - start < best_ns)); then best_ns=$((end - start)); fi
  done
  echo "| replay (bench/rules-replay.yaml: token-bucket per src-ip) | packets | flows | best wall time of 3 | Mpps |"
  echo "|---|--:|--:|--:|--:|"
  awk -v p="$packets" -v f="$flows" -v ns="$best_ns" 'BEGIN {
    printf "| sluiced --replay, %s | %d | %d | %.3f s | %.2f |\n",
      "64-byte UDP, random flow order", p, f, ns / 1e9, p / (ns / 1e3) }'
  echo
  echo "Wall time covers the whole process: reading the pcap, rules, parse, classify, flow"
  echo "table, limiter, writing OUT.pcap and REPORT.json."
}

mode_core() {
  build bench/sluice-bench-core dataplane/sluiced tools/sluice-tracegen
  local json=$DATA/core.json
  mkdir -p "$DATA"
  bench_wait_for_quiet bench
  echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg); running core benchmarks..." >&2
  # Short repetitions (0.25 s), many, in random order: a build starting beside the run
  # spoils a few repetitions of every benchmark rather than all of the last ones, and
  # core_table drops the spoiled ones.
  "$BUILD/bench/sluice-bench-core" --benchmark_repetitions="$REPETITIONS" \
    --benchmark_min_time=0.25 --benchmark_enable_random_interleaving=true \
    --benchmark_display_aggregates_only=true --benchmark_out="$json" \
    --benchmark_out_format=json >&2
  echo "Command: \`$COMMAND\` (medians of the repetitions kept, of $REPETITIONS)"
  echo
  machine
  echo
  core_table "$json"
  echo
  replay_table
}

# ------------------------------------------------------------------------------ rules

# Google Benchmark JSON of sluice-bench-rules -> one row per shape and rule count.
rules_classify_table() {
  /usr/bin/python3 - "$1" <<'EOF'
import json, statistics, sys
runs = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b["run_type"] != "iteration":
        continue
    name, rules = b["run_name"].split("/rules:")
    impl, shape = name.split(", ")
    runs.setdefault((shape, int(rules)), {}).setdefault(impl, []).append(b)
print("| rules | shape | match tables, ns/packet | linear walk (before), ns/packet | matched |")
print("|--:|---|--:|--:|--:|")
for (shape, rules), by in sorted(runs.items(), key=lambda kv: (kv[0][0] != "prefix", kv[0])):
    ns = {impl: statistics.median(1e9 / r["items_per_second"] for r in rs) for impl, rs in by.items()}
    matched = min(r["matched"] for rs in by.values() for r in rs)
    print(f"| {rules:,} | {shape} | {ns['classify']:.1f} | {ns['linear walk']:.1f} | {matched:.0%} |")
EOF
}

# rules_yaml N FILE: N keyed rules without max-flows; only the last matches the trace.
rules_yaml() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write("default: {action: pass}\nrules:\n")
    for i in range(n - 1):
        f.write(f"  - {{name: r{i}, match: {{src: 10.{i >> 8}.{i & 255}.0/24}}, key: src-ip, "
                "rate: 1000pps, burst: 100}\n")
    f.write("  - {name: last, match: {src: 192.0.0.0/12}, key: src-ip, rate: 1000pps, burst: 100}\n")
EOF
}

# replay_rss RULES TRACE: "WALL_S MAX_RSS_KB CPU_S" of one `sluiced --replay` run (CPU: user
# + system, which a busy shared machine disturbs less than the wall time).
replay_rss() {
  local log=$DATA/rules-time.log
  /usr/bin/time -v "$BUILD/dataplane/sluiced" --replay "$2" --out "$DATA/rules-out.pcap" \
    --report "$DATA/rules-report.json" --config "$1" --hash-seed 1 2>"$log" >/dev/null
  awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0
                 for (i = 1; i <= n; i++) s = s * 60 + t[i] }
               /User time/ { u = $2 } /System time/ { sy = $2 }
               /Maximum resident set size/ { kb = $2 }
               END { printf "%s %s %s\n", s, kb, u + sy }' "$log"
}

mode_rules() {
  build bench/sluice-bench-rules dataplane/sluiced tools/sluice-tracegen
  local json=$DATA/rules.json packets=2000000
  mkdir -p "$DATA"
  local trace=$DATA/trace-rules-${packets}p.pcap small=$DATA/trace-rules-10p.pcap
  [ -f "$trace" ] || "$BUILD/tools/sluice-tracegen" --out "$trace" --packets "$packets" \
    --flows 1000 --random-flows --pps 1000000 --src-base 192.0.2.0 --seed 7
  [ -f "$small" ] || "$BUILD/tools/sluice-tracegen" --out "$small" --packets 10 --flows 10 \
    --src-base 192.0.2.0 --seed 7
  bench_wait_for_quiet bench
  "$BUILD/bench/sluice-bench-rules" --benchmark_repetitions="$REPETITIONS" \
    --benchmark_min_time=0.1 --benchmark_enable_random_interleaving=true \
    --benchmark_display_aggregates_only=true --benchmark_out="$json" \
    --benchmark_out_format=json >&2
  echo "Command: \`$COMMAND\` (medians of $REPETITIONS repetitions)"
  echo
  machine
  echo
  rules_classify_table "$json"
  echo
  echo "| keyed rules (src-ip, no max-flows) | replay wall time, 2M packets | wall us/packet | CPU us/packet | max RSS, 2M packets | max RSS, 10-packet run (start-up) |"
  echo "|--:|--:|--:|--:|--:|--:|"
  local n yaml start start_kb start_cpu big big_kb big_cpu
  for n in 1 100 1000 10000; do
    yaml=$DATA/rules-$n.yaml
    rules_yaml "$n" "$yaml"
    read -r start start_kb start_cpu < <(replay_rss "$yaml" "$small")
    read -r big big_kb big_cpu < <(replay_rss "$yaml" "$trace")
    awk -v n="$n" -v w="$big" -v s="$start" -v c="$big_cpu" -v sc="$start_cpu" -v p="$packets" \
      -v kb="$big_kb" -v skb="$start_kb" 'BEGIN { printf "| %d | %.2f s | %.3f | %.3f | %.0f MB | %.0f MB |\n",
        n, w, (w - s) * 1e6 / p, (c - sc) * 1e6 / p, kb / 1024, skb / 1024 }'
  done
  echo
  echo "Wall time covers the whole process (the pcap, the rules, parse, classify, flow tables,"
  echo "limiter, OUT.pcap and REPORT.json); the per-packet figures subtract the 10-packet run's"
  echo "(start-up: loading and compiling the rules, creating the tables)."
}

# ------------------------------------------------------------------------------ instructions

INSTR_BUILD=build-instr

# instructions_count RULES FLOWS PACKETS: callgrind's instruction count of the measured
# process_burst calls, divided by PACKETS.
instructions_count() {
  local rules=$1 flows=$2 packets=$3 out=$INSTR_BUILD/callgrind.out.$1.$2
  valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
    --toggle-collect='sluice::Pipeline::process_burst(sluice::RulesSnapshot const&*' \
    "$INSTR_BUILD/bench/sluice-bench-instructions" --rules "$rules" --flows "$flows" \
    --packets "$packets" >/dev/null 2>"$out.log" ||
    { echo "bench: callgrind run failed (--rules $rules --flows $flows): see $out.log" >&2; exit 1; }
  awk -v p="$packets" '/^totals:/ { printf "%.1f", $2 / p; found = 1 }
                       END { if (!found) exit 1 }' "$out"
}

mode_instructions() {
  command -v valgrind >/dev/null || { echo "bench: valgrind is missing (scripts/setup-deps.sh)" >&2; exit 1; }
  if [ ! -f "$INSTR_BUILD/build.ninja" ]; then
    # -O3 as build-bench, plus debug info for callgrind_annotate. Nothing here links DPDK, so
    # no AVX-512 from its pkg-config flags reaches valgrind's CPU model.
    meson setup "$INSTR_BUILD" --buildtype=release -Db_ndebug=true -Dc_args=-g \
      "-Dcpp_args=-g $BENCH_GCC12_O3_FALSE_POSITIVES" >/dev/null
  fi
  ninja -C "$INSTR_BUILD" bench/sluice-bench-instructions >&2
  local commit packets=65536 none tb tb100k sr pinned
  commit=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- dataplane bench || commit="$commit+changes"
  none=$(instructions_count none 1000 "$packets")
  tb=$(instructions_count tb-5tuple 1000 "$packets")
  tb100k=$(instructions_count tb-5tuple 100000 "$packets")
  sr=$(instructions_count srtcm-dst 1000 "$packets")
  pinned=$(instructions_count srtcm-dst-pinned 1000 "$packets")
  echo "Command: \`$COMMAND\` (callgrind, $packets packets after one untimed pass over the flows)"
  echo
  machine
  echo
  echo "| commit | no rule | token bucket per 5-tuple, 1k flows | token bucket per 5-tuple, 100k flows | srtcm per destination, 1k flows | srtcm per destination, pinned (dense table), 1k flows |"
  echo "|---|--:|--:|--:|--:|--:|"
  echo "| $commit | $none | $tb | $tb100k | $sr | $pinned |"
  echo "| target (issue 14) | <= 80 | <= 180 | – | – | – |"
  echo
  echo "Instructions per packet inside \`Pipeline::process_burst(snapshot, ...)\` (release, -g,"
  echo "$(gcc -dumpfullversion 2>/dev/null | sed 's/^/GCC /')): bursts of 32, every packet forwarded."
  echo "Pinned: the same meter with \`dst: 172.16.0.0/16\` in its match and \`max-flows: 65536\`,"
  echo "so its table is dense (dataplane/core/dense_key.hpp)."
}

# ------------------------------------------------------------------------------ dataplane

# bench_dataplane.sh builds what it runs, waits for a quiet machine and prints markdown itself.
mode_dataplane() {
  local args=(--breakdown --peers --flows "8192:8192 1000 100000 1000000")
  ((REPETITIONS_GIVEN)) && args+=(--repetitions "$REPETITIONS")
  BUILD=$BUILD scripts/bench_dataplane.sh "${args[@]}" "${PASS_ON[@]}"
}

# ------------------------------------------------------------------------------ xdp

mode_xdp() {
  bench_wait_for_quiet bench
  BUILD=$BUILD scripts/bench_xdp.sh
}

# ------------------------------------------------------------------------------ control

mode_control() {
  bench_wait_for_quiet bench
  # shellcheck disable=SC2086 # options, word-split on purpose
  BUILD=$BUILD scripts/bench_control.sh ${BENCH_CONTROL_OPTIONS:-}
}

# Replaces the lines between "<!-- bench:MODE:begin -->" and "<!-- bench:MODE:end -->".
write_doc() {
  local mode=$1 body=$2
  /usr/bin/python3 - "$DOC" "$mode" "$body" <<'EOF'
import sys
path, mode, body = sys.argv[1:]
begin, end = f"<!-- bench:{mode}:begin -->", f"<!-- bench:{mode}:end -->"
text = open(path).read()
if begin not in text or end not in text:
    sys.exit(f"bench: {path} has no {begin} ... {end} section")
head, rest = text.split(begin, 1)
tail = rest.split(end, 1)[1]
open(path, "w").write(f"{head}{begin}\n{body}\n{end}{tail}")
EOF
  echo "bench: wrote the $mode section of $DOC" >&2
}

# ------------------------------------------------------------------------------ main

mode=${1:-}
[ -n "$mode" ] || usage
shift
REPETITIONS=9
REPETITIONS_GIVEN=0
WRITE=0
PASS_ON=()
while (($#)); do
  case $1 in
    --repetitions) REPETITIONS=${2:?}; REPETITIONS_GIVEN=1; shift 2 ;;
    --write) WRITE=1; shift ;;
    --) shift; PASS_ON=("$@"); break ;;
    *) usage ;;
  esac
done
declare -F "mode_$mode" >/dev/null || usage
if ((${#PASS_ON[@]})) && [ "$mode" != dataplane ]; then usage; fi
# Before a long run, not after it: --write needs the mode's section in the document.
if ((WRITE)) && ! grep -q "<!-- bench:$mode:begin -->" "$DOC"; then
  echo "bench: $DOC has no <!-- bench:$mode:begin --> ... <!-- bench:$mode:end --> section for --write" >&2
  exit 2
fi

scripts/setup-deps.sh
out=$("mode_$mode")
echo "$out"
if ((WRITE)); then write_doc "$mode" "$out"; fi

#!/usr/bin/env bash
# pcap_vs_replay: the live dataplane, fed a capture through net_pcap (rx_pcap=trace,
# tx_pcap=out), counts what `sluiced --replay` counts on the same capture: every packet and
# byte counter of every rule and of the default within 1%, and the port's rx/tx the same.
#
# The live run reads the capture as fast as it can, with the real clock; the replay uses the
# capture timestamps (the trace spans ~26 s). So the rules are chosen so that their outcome
# does not depend on time:
#   - token buckets (per source, aggregate with gcra, a child with a parent, and a `pass` dry
#     run) with rates of 0.001-0.01 pps: nothing refills by a whole packet in either run, so
#     each bucket admits exactly its burst;
#   - an srtcm meter with CIR 8 bit/s (1 byte/s): green, yellow and red are set by CBS and EBS;
#   - fixed and sliding windows of 39 h (the longest allowed): both runs stay in one window
#     (a run that straddles a 39 h boundary of the monotonic clock would differ: ~2 s in
#     140400 s);
#   - malformed frames (every 53rd of one trace), IPv6 flows, VLAN and QinQ tags: the default
#     rule and classification.
# No rule caps its flows, so LRU eviction (which depends on timing) never happens.
#
# Stopping: net_pcap keeps polling after the end of the file (RX returns 0), so sluiced is
# stopped with SIGINT once its periodic counters (--stats-interval 0.1) show the port received
# every packet of the capture; a packet counted as received by the port has been processed by
# the time the worker is joined. If the count stops short for 20 s, the test fails with it.
#
# Exit: 0 pass, 1 fail, 77 skip (not root).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
it_init pcap_vs_replay --no-net
it_need_bin SLUICED TRACEGEN
[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (a main and a worker lcore)"

D=$IT_DIR
gen() { "$TRACEGEN" --seed "$1" "${@:2}" >/dev/null; }
gen 1 --out "$D/dns.pcap" --packets 20000 --pps 1000 --flows 300 --random-flows --size-mix \
  --ipv6-share 0.2 --malformed-every 53 --src-base 10.1.0.0 --dst-port 53
gen 2 --out "$D/web.pcap" --packets 5000 --pps 250 --flows 20 --proto tcp --dst-port 80 \
  --vlan 7 --src-base 10.4.0.1 --size 128
gen 3 --out "$D/winf.pcap" --packets 3000 --pps 150 --flows 30 --dst-port 5000 \
  --src-base 10.9.0.1 --qinq 100,200
gen 4 --out "$D/wins.pcap" --packets 3000 --pps 150 --flows 40 --random-flows --dst-port 5001 \
  --src-base 10.10.0.1
gen 5 --out "$D/tenant.pcap" --packets 4000 --pps 200 --flows 8 --dst-port 6000 \
  --src-base 172.16.0.1
gen 6 --out "$D/meter.pcap" --packets 1000 --pps 50 --flows 5 --dst-port 7000 --size 100 \
  --src-base 10.20.0.1
gen 7 --out "$D/dry.pcap" --packets 2000 --pps 100 --flows 10 --dst-port 8000 \
  --src-base 10.30.0.1
"$TRACEGEN" --out "$D/in.pcap" --merge "$D/dns.pcap" --merge "$D/web.pcap" --merge "$D/winf.pcap" \
  --merge "$D/wins.pcap" --merge "$D/tenant.pcap" --merge "$D/meter.pcap" --merge "$D/dry.pcap" \
  >/dev/null
TOTAL=38000

cat >"$D/rules.yaml" <<'EOF'
default: {action: pass}
rules:
  - {name: dns-per-source, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 0.001pps,
     burst: 7, algorithm: token-bucket, action: drop}
  - {name: web-mark, match: {proto: tcp, dst-port: 80}, key: none, rate: 0.01pps, burst: 300,
     algorithm: gcra, action: "mark-dscp:AF11"}
  - {name: window-fixed, match: {proto: udp, dst-port: 5000}, key: src-dst,
     algorithm: fixed-window, window: 39h, limit: 40, action: drop}
  - {name: window-sliding, match: {proto: udp, dst-port: 5001}, key: 5-tuple,
     algorithm: sliding-window, window: 39h, limit: 25, action: drop}
  - {name: tenant-child, match: {proto: udp, dst-port: 6000}, key: src-ip, rate: 0.001pps,
     burst: 60, algorithm: token-bucket, action: drop, parent: tenant}
  - {name: tenant, match: {src: 172.16.0.0/16}, key: none, rate: 0.002pps, burst: 250,
     algorithm: token-bucket, action: drop}
  - {name: meter, match: {proto: udp, dst-port: 7000}, key: none, algorithm: srtcm, rate: 8bit,
     burst: 10000, excess-burst: 20000,
     actions: {green: pass, yellow: "mark-dscp:AF13", red: drop}}
  - {name: dry-run, match: {proto: udp, dst-port: 8000}, key: dst-prefix/24, rate: 0.001pps,
     burst: 100, algorithm: token-bucket, action: pass}
EOF

it_log "replay: $TOTAL packets"
"$SLUICED" --replay "$D/in.pcap" --out "$D/replay.pcap" --report "$D/replay.json" \
  --config "$D/rules.yaml" 2>"$D/replay.err" || { cat "$D/replay.err"; it_fail "replay failed"; }

it_prefix PREFIX
# shellcheck disable=SC2046
it_spawn DP_PID "$D/live.out" "$D/live.err" \
  "$SLUICED" -l 0,1 $(it_eal_common "$PREFIX") \
  --vdev "net_pcap0,rx_pcap=$D/in.pcap,tx_pcap=$D/live.pcap" -- \
  --config "$D/rules.yaml" --report "$D/live.json" --stats-interval 0.1
it_log "live: sluiced on net_pcap (pid $DP_PID)"

# Until port 0 has received the whole capture; fail if the count stalls short of it.
last="" since=$(date +%s)
while :; do
  kill -0 "$DP_PID" 2>/dev/null || { cat "$D/live.err"; it_fail "sluiced exited early"; }
  rx=$(it_last_port_rx "$D/live.out" 0)
  [ "$rx" = "$TOTAL" ] && break
  if [ -n "$rx" ] && [ "$rx" -gt "$TOTAL" ]; then it_fail "port 0 received $rx > $TOTAL packets"; fi
  if [ "$rx" != "$last" ]; then last=$rx since=$(date +%s); fi
  if [ $(($(date +%s) - since)) -ge 20 ]; then
    cat "$D/live.err"
    it_fail "port 0 stopped at rx ${rx:-none} of $TOTAL packets"
  fi
  sleep 0.05
done
it_log "live: port 0 received all $TOTAL packets; stopping with SIGINT"
it_stop "$DP_PID" 20 INT
it_report_table "$D/replay.json" "$D/live.json"

/usr/bin/python3 - "$D/replay.json" "$D/live.json" <<'EOF'
import json, sys
replay, live = (json.load(open(p)) for p in sys.argv[1:3])
fails, exact, compared = [], 0, 0

def compare(what, a, b):
    global exact, compared
    for key, want in a.items():
        if not isinstance(want, int):
            continue
        got = b.get(key)
        compared += 1
        if got == want:
            exact += 1
            continue
        off = abs(got - want) / max(want, 1) if got is not None else 1.0
        print("  %s.%s: replay %d, live %s (%.3f%%)" % (what, key, want, got, 100 * off))
        if got is None or off > 0.01:
            fails.append("%s.%s: replay %d, live %s" % (what, key, want, got))

if [r["name"] for r in replay["rules"]] != [r["name"] for r in live["rules"]]:
    fails.append("rule lists differ")
for a, b in zip(replay["rules"], live["rules"]):
    compare(a["name"], a, b)
compare("default", replay["default"], live["default"])
rp, lp = replay["ports"][0], live["ports"][0]
for key in ("rx_packets", "tx_packets", "tx_bytes"):
    compare("port0", {key: rp[key]}, {key: lp[key]})

r = {x["name"]: x for x in replay["rules"]}
# The rules must have done something, or the comparison proves little.
checks = [
    ("dns-per-source drops", r["dns-per-source"]["dropped_packets"] > 0),
    ("web-mark marks", r["web-mark"]["marked_packets"] > 0),
    ("window-fixed drops", r["window-fixed"]["dropped_packets"] > 0),
    ("window-sliding drops", r["window-sliding"]["dropped_packets"] > 0),
    ("tenant parent refuses", r["tenant-child"]["dropped_packets"] > 0),
    ("meter marks and drops", r["meter"]["marked_packets"] > 0 and r["meter"]["dropped_packets"] > 0),
    ("dry run exceeds but passes", r["dry-run"]["exceeded_packets"] > 0 and r["dry-run"]["dropped_packets"] == 0),
    ("malformed frames counted", replay["default"]["malformed_packets"] > 0),
]
for name, ok in checks:
    if not ok:
        fails.append("trace does not exercise: " + name)
print("compared %d counters: %d identical, %d within 1%%, %d off"
      % (compared, exact, compared - exact - len([f for f in fails if "replay" in f]),
         len([f for f in fails if "replay" in f])))
if fails:
    print("FAIL: pcap_vs_replay: " + "; ".join(fails))
    sys.exit(1)
EOF
it_pass "live (net_pcap) and replay counters agree within 1% on $TOTAL packets"

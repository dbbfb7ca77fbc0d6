#!/usr/bin/env bash
# soak: a live sluiced under steady traffic, rule changes, scrapes and stats reads for a
# bounded time; afterwards its resources must be flat and every packet accounted for
# (issue 13, item 5).
#
#   scripts/soak.sh [MINUTES]        (default 10; needs root; BUILD=dir for another build)
#
#   netns sl-st-ID                           netns sl-sd-ID
#   sluice-sender --iface sstID ==veth== ssdID <- net_af_packet0,qpairs=2 <- sluiced
#                                                 (--lcores 0@0,1@1,2@0: 2 workers)
#
# Traffic: sluice-sender sends SOAK_PPS (default 20,000) 64-byte UDP frames per second from
# SOAK_FLOWS (256) sources on an absolute schedule, for the whole run. That is a known,
# bounded rate (a net_null or infinite_rx net_pcap source runs as fast as the workers poll,
# so its rate is whatever the shared CPUs allow, and its packets have no count outside
# sluiced), and an exact account from outside the dataplane: what the sender says it sent must
# equal what sluiced received, plus what its port missed, plus what the veth dropped before
# the socket. net_af_packet rather than net_af_xdp: its qpairs=2 is a PACKET_FANOUT group, so
# two RX queues (one per worker) exist on a veth, whose single channel net_af_xdp refuses
# ("queue count 2 is larger than combined queue count 1"). Frames go back out of the port.
# DPDK 22.11's net_af_packet does not report what its sockets' rings drop (imissed stays 0);
# sluiced reads the sockets' tp_drops into `missed` (live/packet_ring_drops.hpp), and the
# account below closes either way. So that nothing is lost at all, each queue's ring holds 16384
# frames (32 MiB), 1.6 s of its share of the traffic, so that a worker descheduled on a busy
# machine does not overflow it (the default 512 did: 1% lost in a 10-minute run at load 18).
#
# While it runs, one driver inside sluiced's namespace (/usr/bin/python3, a schedule of its own
# for each job):
#   - every 10 ms a rule change through the control socket (protocol v2, docs/CONTROL.md, on
#     one connection): `rule.set flood` with the next rate of a cycle of 5 (40-80 pps per
#     source against ~78 pps offered: some drop, some not), and every 10th change a
#     `config.load` of the whole file instead; each must be applied (ok, generation + 1);
#   - every 100 ms a GET /metrics (--metrics, urllib) and a `sluicectl stats --json`;
#   - every second the sluiced process's open fds (/proc/PID/fd) and VmRSS (/proc/PID/status).
# Checks afterwards (exit 1 with the reasons on any violation):
#   - mbufs: REPORT.json's dataplane mbufs_leaked == 0 and mbufs_in_use == kept by drivers;
#   - fds and RSS flat: the warm-up is SOAK_WARMUP_S seconds (default 60: the first minute,
#     when pools, rings and flow-table pages are first touched) and is ignored. The baseline
#     is the first sample at or after the warm-up's end; every later sample, the last one
#     included, must be within 1% of it (RSS), and fds must equal it, up to the connections
#     the driver itself may have open at that instant (at most 2: one scrape and one stats
#     read in flight, as the server may close them a moment after the client).
#   - packets: from REPORT.json, rx == tx + every counted drop (rule and default drops,
#     tx-buffer-full, shaper-full, at-shutdown); and sent == rx + missed + veth rx_dropped;
#   - monotone: every counter (not the gauges: active_flows, mbufs_in_use, ...) never goes
#     down from one `stats --json` read to the next, nor from one scrape to the next, nor from
#     the last read to REPORT.json; every rule change applied, and the schedules kept (at
#     least 90% of the planned changes, scrapes and reads happened).
# Prints the figures: fds, RSS, packets, changes, scrapes, reads, load average.
#
# Environment: SOAK_WARMUP_S (60), SOAK_PPS (20000), SOAK_FLOWS (256); SLUICED, SENDER,
# SLUICECTL (default: under BUILD=build). IT_KEEP=1 keeps the scratch directory.
# Exit: 0 pass, 1 fail, 2 bad usage, 77 skip (not root, no veth, < 2 CPUs).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
MINUTES=${1:-10}
if ! [[ $MINUTES =~ ^[0-9]+(\.[0-9]+)?$ ]] || [[ $MINUTES =~ ^0*(\.0*)?$ ]]; then
  echo "usage: scripts/soak.sh [MINUTES]   (a positive number; got '$MINUTES')" >&2
  exit 2
fi
BUILD=${BUILD:-$ROOT/build}
SLUICED=${SLUICED:-$BUILD/dataplane/sluiced}
SENDER=${SENDER:-$BUILD/tools/sluice-sender}
SLUICECTL=${SLUICECTL:-$BUILD/control/sluicectl}
WARMUP_S=${SOAK_WARMUP_S:-60}
PPS=${SOAK_PPS:-20000}
FLOWS=${SOAK_FLOWS:-256}
PY=/usr/bin/python3

# shellcheck source=tests/integration/lib.sh
source "$ROOT/tests/integration/lib.sh"
it_init soak
it_need_bin SLUICED SENDER SLUICECTL
[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (a main and two worker lcores)"
[ -x "$PY" ] || it_fail "$PY is not installed"

SECS=$($PY -c "print(max(1, round(float('$MINUTES') * 60)))")
$PY -c "import sys; sys.exit(0 if $WARMUP_S + 5 < $SECS else 1)" ||
  it_fail "the warm-up (${WARMUP_S}s, SOAK_WARMUP_S) must end at least 5 s before the run (${SECS}s)"
NS_DP=sl-sd-$IT_ID NS_TX=sl-st-$IT_ID
DP_IF=ssd$IT_ID TX_IF=sst$IT_ID
SOCK=$IT_DIR/ctl/sluiced.sock
it_netns_veth "$DP_IF" "$NS_DP" "$TX_IF" "$NS_TX"

write_rules() {  # write_rules FILE RATE_PPS
  cat >"$1" <<EOF
default: {action: pass}
rules:
  - {name: flood, match: {proto: udp, dst-port: 9}, key: src-ip, rate: ${2}pps, burst: 20,
     action: drop}
  - {name: web, match: {proto: tcp, dst-port: 80}, key: src-ip, rate: 100pps, burst: 20,
     action: drop}
EOF
}
write_rules "$IT_DIR/rules.yaml" 60

it_prefix PREFIX
# shellcheck disable=SC2046
it_spawn DP_PID "$IT_DIR/sluiced.out" "$IT_DIR/sluiced.err" \
  ip netns exec "$NS_DP" "$SLUICED" --lcores 0@0,1@1,2@0 $(it_eal_common "$PREFIX") \
  --vdev "net_af_packet0,iface=$DP_IF,qpairs=2,framecnt=16384" -- \
  --config "$IT_DIR/rules.yaml" --report "$IT_DIR/report.json" \
  --control "$SOCK" --metrics 127.0.0.1:0
if ! it_try_wait_for "$IT_DIR/sluiced.err" '2 worker\(s\) running' 60 "$DP_PID"; then
  grep -v '^EAL:' "$IT_DIR/sluiced.err" || true
  it_fail "sluiced did not start 2 workers on net_af_packet"
fi
METRICS_PORT=$(sed -n 's/.*metrics: .*(port \([0-9]*\)).*/\1/p' "$IT_DIR/sluiced.err" | head -1)
[ -n "$METRICS_PORT" ] || it_fail "sluiced logged no metrics port"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
it_log "sluiced (pid $DP_PID) runs 2 workers; metrics on port $METRICS_PORT; ${SECS}s of" \
  "$PPS pps from $FLOWS sources, warm-up ${WARMUP_S}s; load average $LOAD0"

it_rt_prefix RT
# shellcheck disable=SC2086
it_spawn S_PID "$IT_DIR/sender.json" "$IT_DIR/sender.err" $RT ip netns exec "$NS_TX" \
  "$SENDER" --iface "$TX_IF" --dst-port 9 --pps "$PPS" --flows "$FLOWS" --seconds "$SECS" \
  --grace 5

# The driver runs until the sender is done (its PID file is the sign), then returns.
it_spawn DRV_PID "$IT_DIR/driver.out" "$IT_DIR/driver.err" \
  ip netns exec "$NS_DP" $PY "$HERE/lib/soak_driver.py" --dir "$IT_DIR" --pid "$DP_PID" \
  --socket "$SOCK" --metrics "http://127.0.0.1:$METRICS_PORT/metrics" \
  --sluicectl "$SLUICECTL" --seconds "$SECS"
it_wait_exit "$S_PID" $((SECS + 30))
[ "$IT_RC" = 0 ] || { cat "$IT_DIR/sender.err"; it_fail "sender: exit status $IT_RC"; }
it_log "sender done: $(cat "$IT_DIR/sender.json")"
it_wait_exit "$DRV_PID" 60
[ "$IT_RC" = 0 ] || { cat "$IT_DIR/driver.err"; it_fail "the driver failed (status $IT_RC)"; }
cat "$IT_DIR/driver.err" >&2
it_log "driver done"
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
# What the veth pair dropped (a veth counts a failed forward on the sender's end as tx_dropped).
echo $(( $(ip netns exec "$NS_DP" cat "/sys/class/net/$DP_IF/statistics/rx_dropped") + \
  $(ip netns exec "$NS_TX" cat "/sys/class/net/$TX_IF/statistics/tx_dropped") )) >"$IT_DIR/veth_dropped"
it_log "stopping sluiced (SIGTERM)"
it_stop "$DP_PID" 60 TERM
it_log "sluiced stopped"
# A worker that misses a counters handover (a busy shared CPU) is logged each time; count them.
LATE=$(grep -c 'did not hand over' "$IT_DIR/sluiced.err" || true)
grep -v '^EAL:' "$IT_DIR/sluiced.err" | grep -v 'did not hand over' >&2 || true
it_log "late counters handovers (a worker descheduled > 200 ms): $LATE"
it_report_table "$IT_DIR/report.json"

$PY "$HERE/lib/soak_check.py" --dir "$IT_DIR" --warmup "$WARMUP_S" --load "$LOAD0" "$LOAD1" ||
  it_fail "see the lines above"
it_pass "${SECS}s: fds and RSS flat, no mbuf leaked, every packet accounted for, counters monotone"

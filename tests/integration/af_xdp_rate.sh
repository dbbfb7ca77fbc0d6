#!/usr/bin/env bash
# af_xdp_rate: sluiced on a veth through net_af_xdp admits what its token buckets allow.
#
#   netns sl-tx-ID                       netns sl-dp-ID
#   sluice-sender --iface sltID ==veth== sldID <- net_af_xdp0 <- sluiced (-l 0,1, one port:
#                                                  conforming packets go back out of it)
#
# Phase 1, aggregate: rule `agg` (udp dst-port 9, key none, 20 kpps, burst 2000) with one
#   source sending 40 kpps (2x) for 3 s. The bucket starts full and the offered load always
#   exceeds the rate, so conformed = B + r*T: the admitted rate (conformed - B) / T, with T
#   the sender's first-to-last-packet time, must be within 2% of 20 kpps.
# Phase 2, per source: rule `per-src` (udp dst-port 10, key src-ip, 5 kpps, burst 500) with
#   two sources at once, 10 kpps (2x) and 15 kpps (3x): each has its own bucket, so conformed
#   = 2B + r*(T_a + T_b) (within 2%), and active_flows = 2. One shared bucket would admit
#   half of that.
#
# Why bursts of 100 ms of the rate and not a few packets: on a machine whose two CPUs are
# shared with compilers, the polling worker can be off its CPU for tens of milliseconds; a
# bucket that fills in less time than that loses refill during the gap, and the admitted rate
# then falls below r (with burst 100 it measured 40% low here). The limiter is right to do
# so; the test measures the rate, not the scheduler. The sender runs at SCHED_FIFO on CPU 0
# when allowed, the worker polls on CPU 1.
#
# Exit: 0 pass, 1 fail, 77 skip (not root, no veth, no AF_XDP in the kernel or DPDK, < 2 CPUs).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
it_init af_xdp_rate
it_need_bin SLUICED SENDER

[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (a main and a worker lcore)"
/usr/bin/python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
  it_skip "the kernel has no AF_XDP sockets"

RATE=20000 BURST=2000 OFFER=40000
PS_RATE=5000 PS_BURST=500 PS_OFFER_A=10000 PS_OFFER_B=15000
SECS=3
TOL=0.02

NS_DP=sl-dp-$IT_ID NS_TX=sl-tx-$IT_ID
DP_IF=sld$IT_ID TX_IF=slt$IT_ID
it_netns_veth "$DP_IF" "$NS_DP" "$TX_IF" "$NS_TX"

cat >"$IT_DIR/rules.yaml" <<EOF
default: {action: pass}
rules:
  - {name: agg, match: {proto: udp, dst-port: 9}, key: none, rate: ${RATE}pps, burst: $BURST,
     algorithm: token-bucket, action: drop}
  - {name: per-src, match: {proto: udp, dst-port: 10}, key: src-ip, rate: ${PS_RATE}pps,
     burst: $PS_BURST, algorithm: token-bucket, action: drop}
EOF

it_start_sluiced_af_xdp DP_PID "$NS_DP" "$DP_IF" --stats-interval 1

it_rt_prefix RT
# start_sender VAR OUT SRC PPS DST_PORT: one paced source in the sender namespace, on CPU 0
# (the worker polls CPU 1); VAR gets its PID (the sender's own: chrt, ip and taskset exec).
start_sender() {
  # shellcheck disable=SC2086
  it_spawn "$1" "$2" "$2.err" $RT ip netns exec "$NS_TX" taskset -c 0 "$SENDER" \
    --iface "$TX_IF" --src-base "$3" --dst 198.19.0.1 --dst-port "$5" --pps "$4" --seconds "$SECS"
}
finish_sender() {  # finish_sender PID OUT
  it_wait_exit "$1" $((SECS + 20))
  [ "$IT_RC" = 0 ] || { cat "$2.err"; it_fail "sender ($2): exit status $IT_RC"; }
  cat "$2"
}

it_log "phase 1: one source at $OFFER pps against $RATE pps (burst $BURST), ${SECS}s"
start_sender S_PID "$IT_DIR/agg.json" 198.18.0.1 $OFFER 9
finish_sender "$S_PID" "$IT_DIR/agg.json"

it_log "phase 2: two sources at $PS_OFFER_A and $PS_OFFER_B pps against $PS_RATE pps each"
start_sender A_PID "$IT_DIR/ps-a.json" 198.18.1.1 $PS_OFFER_A 10
start_sender B_PID "$IT_DIR/ps-b.json" 198.18.2.1 $PS_OFFER_B 10
finish_sender "$A_PID" "$IT_DIR/ps-a.json"
finish_sender "$B_PID" "$IT_DIR/ps-b.json"

sleep 0.3  # let the worker take what is still in its RX ring
it_stop "$DP_PID" 20
it_report_table "$IT_DIR/report.json"

/usr/bin/python3 - "$IT_DIR" $RATE $BURST $PS_RATE $PS_BURST $TOL <<'EOF'
import json, sys
d, rate, burst, ps_rate, ps_burst, tol = sys.argv[1], *map(float, sys.argv[2:])
rep = json.load(open(d + "/report.json"))
rules = {r["name"]: r for r in rep["rules"]}
agg, ps = rules["agg"], rules["per-src"]
s_agg = json.load(open(d + "/agg.json"))
s_a, s_b = json.load(open(d + "/ps-a.json")), json.load(open(d + "/ps-b.json"))
fails = []

t = s_agg["duration_s"]
got = (agg["conformed_packets"] - burst) / t
print("aggregate: sent %d in %.4fs (%.0f pps), matched %d, conformed %d, dropped %d; "
      "admitted (conformed - B)/T = %.1f pps vs %d (%+.2f%%)"
      % (s_agg["packets"], t, s_agg["achieved_pps"], agg["matched_packets"],
         agg["conformed_packets"], agg["dropped_packets"], got, rate, 100 * (got / rate - 1)))
if abs(got / rate - 1) > tol: fails.append("aggregate rate off by more than %.0f%%" % (100 * tol))
if agg["matched_packets"] < 1.5 * (burst + rate * t):
    fails.append("aggregate: too few packets reached sluiced to test the limit")
if agg["dropped_packets"] != agg["exceeded_packets"] or agg["passed_packets"] != agg["conformed_packets"]:
    fails.append("aggregate: drop action inconsistent (dropped != exceeded or passed != conformed)")

ta, tb = s_a["duration_s"], s_b["duration_s"]
got = (ps["conformed_packets"] - 2 * ps_burst) / (ta + tb)
print("per source: sent %d + %d in %.4fs + %.4fs, matched %d, conformed %d, active flows %d; "
      "admitted per source (conformed - 2B)/(Ta + Tb) = %.1f pps vs %d (%+.2f%%)"
      % (s_a["packets"], s_b["packets"], ta, tb, ps["matched_packets"], ps["conformed_packets"],
         ps["active_flows"], got, ps_rate, 100 * (got / ps_rate - 1)))
if abs(got / ps_rate - 1) > tol: fails.append("per-source rate off by more than %.0f%%" % (100 * tol))
if ps["active_flows"] != 2: fails.append("per-source: active_flows %d, want 2" % ps["active_flows"])

port = rep["ports"][0]
print("port 0: rx %d tx %d missed %d; default rule matched %d"
      % (port["rx_packets"], port["tx_packets"], port["missed_packets"], rep["default"]["matched_packets"]))
if fails:
    print("FAIL: af_xdp_rate: " + "; ".join(fails))
    sys.exit(1)
EOF
it_pass "aggregate and per-source admitted rates within 2% of the configured rates"

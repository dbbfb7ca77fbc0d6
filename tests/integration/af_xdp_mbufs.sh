#!/usr/bin/env bash
# af_xdp_mbufs: after sluiced on net_af_xdp stops, every mbuf is back in its pool except the
# ones the driver keeps by design, and none is reported leaked.
#
#   netns sl-mt-ID                       netns sl-md-ID
#   sluice-sender --iface smtID ==veth== smdID <- net_af_xdp0 <- sluiced (-l 0,1, one port)
#
# What net_af_xdp does with our pool (DPDK 22.11, zero-copy UMEM mode; see
# dataplane/live/port.hpp): at RX queue set-up it takes 2048 mbufs for its fill ring and keeps
# that many there until the pool is freed (close returns none); mbufs we send out of the port
# go back to the pool only when a later TX call reads the completion ring. Before the fix,
# every run logged "2049 mbuf(s) still out of the pool at shutdown": the fill ring plus the
# last TX burst, which nothing reclaimed.
#
# Traffic, one sender after the other, so every path that holds an mbuf is used:
#   dst-port 9:  default pass: forwarded back out of the port (zero-copy TX, completion ring);
#   dst-port 10: rule `drop`: freed by the worker;
#   dst-port 11: rule `shape` (leaky-bucket 1 kpps, max-delay 2 s) at 5 kpps: packets wait in
#                the timing wheel, and those still waiting at SIGINT are freed at shutdown.
# Checks REPORT.json's "dataplane" object: mbufs_in_use == mbufs_kept_by_drivers (what the
# driver took at set-up, as logged), mbufs_leaked == 0, packets really went out and were held
# at shutdown; and stderr has no "still out of the pool".
#
# Exit: 0 pass, 1 fail, 77 skip (not root, no veth, no AF_XDP in the kernel or DPDK, < 2 CPUs).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
it_init af_xdp_mbufs
it_need_bin SLUICED SENDER

[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (a main and a worker lcore)"
/usr/bin/python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
  it_skip "the kernel has no AF_XDP sockets"

NS_DP=sl-md-$IT_ID NS_TX=sl-mt-$IT_ID
DP_IF=smd$IT_ID TX_IF=smt$IT_ID
it_netns_veth "$DP_IF" "$NS_DP" "$TX_IF" "$NS_TX"

cat >"$IT_DIR/rules.yaml" <<'EOF'
default: {action: pass}
rules:
  - {name: drop, match: {proto: udp, dst-port: 10}, key: none, rate: 1pps, burst: 1,
     action: drop}
  - {name: shape, match: {proto: udp, dst-port: 11}, key: none, rate: 1kpps, burst: 1,
     algorithm: leaky-bucket, max-delay: 2s}
EOF

it_start_sluiced_af_xdp DP_PID "$NS_DP" "$DP_IF"

it_rt_prefix RT
send() {  # send DST_PORT PPS SECONDS
  # shellcheck disable=SC2086
  it_spawn S_PID "$IT_DIR/send-$1.json" "$IT_DIR/send-$1.err" $RT ip netns exec "$NS_TX" \
    taskset -c 0 "$SENDER" --iface "$TX_IF" --dst-port "$1" --pps "$2" --seconds "$3" --flows 16
  it_wait_exit "$S_PID" $(($3 + 20))
  [ "$IT_RC" = 0 ] || { cat "$IT_DIR/send-$1.err"; it_fail "sender (port $1): exit status $IT_RC"; }
  it_log "sent to port $1: $(cat "$IT_DIR/send-$1.json")"
}
send 9 20000 1
send 10 20000 1
send 11 5000 1
sleep 0.2  # the worker takes what is in its RX ring; the shaper still holds ~1 s of packets
it_stop "$DP_PID" 20
grep -v '^EAL:' "$IT_DIR/sluiced.err" >&2 || true
it_report_table "$IT_DIR/report.json"

if grep -q 'still out of the pool' "$IT_DIR/sluiced.err"; then
  it_fail "sluiced reported leaked mbufs: $(grep 'still out of the pool' "$IT_DIR/sluiced.err")"
fi
# What the driver took at set-up, as sluiced logged it ("" if nothing: copy mode).
LOGGED=$(sed -n 's/.*net_af_xdp holds \([0-9]*\) mbufs.*/\1/p' "$IT_DIR/sluiced.err" | head -1)

/usr/bin/python3 - "$IT_DIR/report.json" "${LOGGED:-0}" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
logged = int(sys.argv[2])
d = rep["dataplane"]
rules = {r["name"]: r for r in rep["rules"]}
print("dataplane: rx %d tx %d dropped at shutdown %d; mbufs: pool %d, out after close %d, "
      "kept by drivers %d, leaked %d"
      % (d["rx_packets"], d["tx_packets"], d["dropped_at_shutdown"], d["mbufs_total"],
         d["mbufs_in_use"], d["mbufs_kept_by_drivers"], d["mbufs_leaked"]))
fails = []
if d["mbufs_leaked"] != 0:
    fails.append("%d mbufs leaked" % d["mbufs_leaked"])
if d["mbufs_in_use"] != d["mbufs_kept_by_drivers"]:
    fails.append("%d mbufs out of the pool after close, %d kept by the driver"
                 % (d["mbufs_in_use"], d["mbufs_kept_by_drivers"]))
if d["mbufs_kept_by_drivers"] != logged:
    fails.append("kept by drivers %d, but the set-up log said %d" % (d["mbufs_kept_by_drivers"], logged))
# One RX queue: the PMD's fill ring is 2048 (zero-copy) or takes nothing (copy mode).
if d["mbufs_kept_by_drivers"] not in (0, 2048):
    fails.append("net_af_xdp kept %d mbufs, expected 2048 (or 0)" % d["mbufs_kept_by_drivers"])
if d["tx_packets"] < 10000:
    fails.append("only %d packets went back out: the TX path was not exercised" % d["tx_packets"])
if rules["drop"]["dropped_packets"] < 10000:
    fails.append("only %d packets dropped by the rule" % rules["drop"]["dropped_packets"])
if d["dropped_at_shutdown"] == 0:
    fails.append("no packet was held at shutdown: the wheel path was not exercised")
if fails:
    print("FAIL: af_xdp_mbufs: " + "; ".join(fails))
    sys.exit(1)
EOF
it_pass "after shutdown the pool is full but for the $LOGGED mbufs net_af_xdp keeps; none leaked"

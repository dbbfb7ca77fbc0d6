#!/usr/bin/env bash
# vhost_virtio: per-flow limits hold against a DPDK traffic generator in another process.
#
#   dpdk-testpmd --forward-mode=flowgen          sluiced
#   net_virtio_user0 ===== vhost-user socket ===== net_vhost0 (one port: back out of it)
#
# flowgen (app/test-pmd/flowgen.c) sends, as fast as it can, 64-byte UDP packets from
# 10.254.0.0:1000 to 10.253.0.0+i:1001, i = 0 .. --flowgen-flows - 1 (64 here), in turn; what
# comes back it discards. sluiced's rule `per-flow` (udp, dst 10.253.0.0/16, dst-port 1001,
# key src-dst, token bucket 100 pps, burst 200) thus holds 64 buckets, every one offered far
# more than its rate (~1 Mpps / 64), so each admits B + r*T, T being how long traffic flowed.
#
# T is bracketed from sluiced's own counters: it prints them every 0.1 s, a watcher stamps
# each table when it appears, and the tables just before and after the first and the last
# change of `matched` give T_min <= T <= T_max (0.03 s added for the printing latency). The
# test requires
#     flows * (B + r*T_min) - flows  <=  conformed  <=  flows * (B + r*T_max) + flows
# (one packet per bucket for rounding), and active_flows == 64.
#
# Both processes use --no-huge (EAL then backs memory with memfd, which virtio-user can share
# with the vhost side), their own --file-prefix, and separate CPUs for their polling lcores:
# sluiced's worker on CPU 1, testpmd's forwarding lcore on CPU 0.
#
# Exit: 0 pass, 1 fail, 77 skip (not root, no dpdk-testpmd, < 2 CPUs).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
it_init vhost_virtio --no-net
it_need_bin SLUICED
[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (one polling lcore per process)"
TESTPMD=${TESTPMD:-$(command -v dpdk-testpmd || true)}
if [ -z "$TESTPMD" ] || [ ! -x "$TESTPMD" ]; then
  it_skip "dpdk-testpmd is not installed (package dpdk)"
fi

FLOWS=64 RATE=100 BURST=200 SECS=3
D=$IT_DIR
SOCK=$D/vhost.sock

cat >"$D/rules.yaml" <<EOF
default: {action: pass}
rules:
  - {name: per-flow, match: {proto: udp, dst: 10.253.0.0/16, dst-port: 1001}, key: src-dst,
     rate: ${RATE}pps, burst: $BURST, algorithm: token-bucket, action: drop}
EOF

it_prefix P_DP
it_prefix P_GEN
# The vhost side first: it creates the socket and waits for the frontend.
# shellcheck disable=SC2046
it_spawn DP_PID "$D/sluiced.out" "$D/sluiced.err" \
  "$SLUICED" -l 0,1 $(it_eal_common "$P_DP") --vdev "net_vhost0,iface=$SOCK,queues=1" -- \
  --config "$D/rules.yaml" --report "$D/report.json" --stats-interval 0.1
it_wait_for "$D/sluiced.err" 'worker\(s\) running' 30 "$DP_PID"
it_watch_rule W_PID "$D/sluiced.out" per-flow "$D/tables.txt"
it_log "sluiced running on net_vhost0 ($SOCK)"

# shellcheck disable=SC2046
it_spawn GEN_PID "$D/testpmd.out" "$D/testpmd.err" \
  "$TESTPMD" --lcores 0@0,1@0 $(it_eal_common "$P_GEN") \
  --vdev "net_virtio_user0,path=$SOCK,queues=1" -- \
  --forward-mode=flowgen --flowgen-flows=$FLOWS --nb-cores=1 --total-num-mbufs=8192 \
  --stats-period=1
# Traffic is flowing once sluiced's counters move; then let it run SECS seconds.
it_wait_for "$D/tables.txt" '^[0-9.]+ [1-9]' 30 "$GEN_PID"
it_log "flowgen traffic reaches sluiced; ${SECS}s of it"
sleep "$SECS"
it_stop "$GEN_PID" 20 INT
it_log "testpmd stopped"
sleep 0.5  # a few more tables with the final counts
it_stop "$DP_PID" 20 INT
kill "$W_PID" 2>/dev/null || true
grep -E "Forward statistics" -A3 "$D/testpmd.out" | head -4 || true
it_report_table "$D/report.json"

/usr/bin/python3 - "$D/report.json" "$D/tables.txt" $FLOWS $RATE $BURST <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
flows, rate, burst = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
rule = next(r for r in rep["rules"] if r["name"] == "per-flow")
tables = [tuple(float(x) for x in l.split()) for l in open(sys.argv[2]) if l.strip()]
final = rule["matched_packets"]
fails = []
lam = 0.03  # a table is seen at most this long after its counters were read
k1 = next((i for i, t in enumerate(tables) if t[1] > 0), None)
k2 = next((i for i, t in enumerate(tables) if t[1] == final), None)
if k1 is None or k2 is None or k1 == 0 or k2 <= k1:
    print("FAIL: vhost_virtio: the counters tables do not show traffic start and stop "
          "(%d tables, first with traffic %s, first with the final count %s)" % (len(tables), k1, k2))
    sys.exit(1)
t_max = tables[k2][0] - (tables[k1 - 1][0] - lam)
t_min = (tables[k2 - 1][0] - lam) - tables[k1][0]
lo = flows * (burst + rate * t_min) - flows
hi = flows * (burst + rate * t_max) + flows
got = rule["conformed_packets"]
print("per-flow: matched %d (%.2f Mpps), conformed %d, active flows %d; traffic lasted %.3f..%.3f s "
      "as sluiced saw it: flows*(B + r*T) in [%.0f, %.0f]; T from conformed = %.3f s"
      % (final, final / max(t_min, 1e-9) / 1e6, got, rule["active_flows"], t_min, t_max, lo, hi,
         (got / flows - burst) / rate))
if not lo <= got <= hi:
    fails.append("conformed %d outside [%.0f, %.0f]" % (got, lo, hi))
if rule["active_flows"] != flows:
    fails.append("active_flows %d, want %d (one bucket per flowgen flow)" % (rule["active_flows"], flows))
if final < 10 * hi:
    fails.append("matched %d: the generator did not overload the limits (want > 10x admitted)" % final)
if fails:
    print("FAIL: vhost_virtio: " + "; ".join(fails))
    sys.exit(1)
EOF
it_pass "flowgen $FLOWS flows over vhost-user: per-flow buckets admitted within flows*(B + r*T) bounds"

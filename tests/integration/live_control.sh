#!/usr/bin/env bash
# live_control: an operator changes the rules of a running sluiced with `sluicectl` while it
# limits real traffic (issue 11), and the dataplane follows.
#
#   netns sl-tx-ID                       netns sl-dp-ID
#   sluice-sender --iface sltID ==veth== sldID <- net_af_xdp0 <- sluiced --control SOCK
#
# One source sends 4 kpps to rule `flood` (udp dst-port 9, key src-ip, 1 kpps, drop above).
# While it flows:
#   - the admitted rate (passed_packets between two `stats --json` reads 1 s apart) is ~1 kpps;
#   - `rule set flood --rate 2500pps`: the admitted rate follows to ~2.5 kpps (within 25%);
#   - `rule add extra.yaml`, `rule list` shows it, `rule del extra` removes it;
#   - `config diff good.yaml` prints the expected lines and changes nothing;
#   - `config load bad.yaml` exits 2 with `bad.yaml:LINE:`, the rules stay as they were and
#     the counters keep growing;
#   - `config load good.yaml` (flood at 1500pps, a new rule) applies: the rate follows again.
# Every read is consistent (matched == passed + dropped); the socket is mode 0600. At the end,
# SIGTERM: REPORT.json counts at least the last live read.
#
# Exit: 0 pass, 1 fail, 77 skip (not root, no veth, no AF_XDP in the kernel or DPDK, < 2 CPUs).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
it_init live_control
it_need_bin SLUICED SENDER SLUICECTL

[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (a main and a worker lcore)"
/usr/bin/python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
  it_skip "the kernel has no AF_XDP sockets"

# The sender runs until the last read is taken (it_stop below); SECS only bounds it. A fixed
# 14 s once ran out before the last phase on a loaded host, where each sluicectl call is slow.
RATE1=1000 RATE2=2500 RATE3=1500 OFFER=4000 SECS=300
NS_DP=sl-dp-$IT_ID NS_TX=sl-tx-$IT_ID
DP_IF=sld$IT_ID TX_IF=slt$IT_ID
SOCK=$IT_DIR/ctl/sluiced.sock
it_netns_veth "$DP_IF" "$NS_DP" "$TX_IF" "$NS_TX"
ctl() { timeout 10 "$SLUICECTL" --socket "$SOCK" "$@"; }

cat >"$IT_DIR/rules.yaml" <<EOF
default: {action: pass}
rules:
  - {name: flood, match: {proto: udp, dst-port: 9}, key: src-ip, rate: ${RATE1}pps, burst: 100,
     action: drop}
EOF
cat >"$IT_DIR/extra.yaml" <<EOF
rules:
  - {name: extra, match: {proto: tcp, dst-port: 443}, key: src-ip, rate: 50pps, burst: 10,
     action: drop}
EOF
cat >"$IT_DIR/good.yaml" <<EOF
default: {action: pass}
rules:
  - {name: flood, match: {proto: udp, dst-port: 9}, key: src-ip, rate: ${RATE3}pps, burst: 100,
     action: drop}
  - {name: web, match: {proto: tcp, dst-port: 80}, key: src-ip, rate: 100pps, burst: 20,
     action: drop}
EOF
# Line 4: a rate that is no rate.
cat >"$IT_DIR/bad.yaml" <<EOF
default: {action: pass}
rules:
  - name: flood
    rate: fast
    match: {proto: udp, dst-port: 9}
    key: src-ip
    burst: 100
    action: drop
EOF

it_start_sluiced_af_xdp DP_PID "$NS_DP" "$DP_IF" --control "$SOCK"
MODE=$(stat -c %a "$SOCK")
[ "$MODE" = 600 ] || it_fail "the control socket has mode $MODE (want 600)"

it_rt_prefix RT
# shellcheck disable=SC2086
it_spawn S_PID "$IT_DIR/sender.json" "$IT_DIR/sender.err" $RT ip netns exec "$NS_TX" \
  taskset -c 0 "$SENDER" --iface "$TX_IF" --src-base 198.18.0.1 --dst 198.19.0.1 \
  --dst-port 9 --pps $OFFER --seconds $SECS

# The first window starts once the sender's packets reach the rule, not after a fixed wait:
# on a loaded host the sender's start took longer than the 1.5 s this used to sleep, and the
# first window read "offered 0 pps".
it_wait_for_matched "$SOCK" flood "$S_PID" 20
# Past the bucket's burst (100 at most; the offer is 4x the rate) into the steady state.
sleep 0.5

# read NAME: the counters now, as $IT_DIR/NAME.json, with the monotonic time of the read.
read_stats() {
  it_monotonic >"$IT_DIR/$1.t"
  ctl stats --json >"$IT_DIR/$1.json" || it_fail "sluicectl stats --json failed"
}
# rate_window A B: two reads 1 s apart.
rate_window() { read_stats "$1"; sleep 1; read_stats "$2"; }

it_log "rate at ${RATE1}pps"
rate_window r1a r1b

it_log "rule set flood --rate ${RATE2}pps"
ctl rule set flood --rate "${RATE2}pps" >"$IT_DIR/set.txt" || it_fail "rule set failed"
cat "$IT_DIR/set.txt"
grep -q '^~ flood: rate (buckets kept)' "$IT_DIR/set.txt" || it_fail "rule set did not report the change"
sleep 0.3
rate_window r2a r2b

it_log "rule add / list / del"
ctl rule add "$IT_DIR/extra.yaml" || it_fail "rule add failed"
ctl rule list >"$IT_DIR/list-add.txt" || it_fail "rule list failed"
cat "$IT_DIR/list-add.txt"
grep -q '^extra ' "$IT_DIR/list-add.txt" || it_fail "rule list does not show the added rule"
grep -q '^flood .*2\.5kpps' "$IT_DIR/list-add.txt" || it_fail "rule list does not show flood at ${RATE2}pps"
ctl rule del extra || it_fail "rule del failed"
ctl rule list >"$IT_DIR/list-del.txt" || it_fail "rule list failed"
! grep -q '^extra ' "$IT_DIR/list-del.txt" || it_fail "rule del left the rule in place"

it_log "config diff good.yaml"
ctl config diff "$IT_DIR/good.yaml" >"$IT_DIR/diff.txt" || it_fail "config diff failed"
cat "$IT_DIR/diff.txt"
grep -q '^~ flood: rate (buckets kept)' "$IT_DIR/diff.txt" || it_fail "config diff: no flood change"
grep -q '^+ web' "$IT_DIR/diff.txt" || it_fail "config diff: web not added"
grep -q '1 added, 1 changed, 0 removed, 0 unchanged' "$IT_DIR/diff.txt" || it_fail "config diff: wrong summary"
ctl rule list >"$IT_DIR/list-diff.txt"
cmp -s "$IT_DIR/list-del.txt" "$IT_DIR/list-diff.txt" || it_fail "config diff changed the rules"

it_log "config load bad.yaml"
read_stats bad-before
rc=0
ctl config load "$IT_DIR/bad.yaml" >"$IT_DIR/bad.out" 2>"$IT_DIR/bad.err" || rc=$?
cat "$IT_DIR/bad.err"
[ "$rc" = 2 ] || it_fail "config load of a bad file exited $rc (want 2)"
grep -Eq 'bad\.yaml:[0-9]+:' "$IT_DIR/bad.err" || it_fail "the error does not name bad.yaml:LINE:"
ctl rule list >"$IT_DIR/list-bad.txt"
cmp -s "$IT_DIR/list-del.txt" "$IT_DIR/list-bad.txt" || it_fail "a refused load changed the rules"
sleep 0.3
read_stats bad-after

it_log "config load good.yaml"
ctl config load "$IT_DIR/good.yaml" || it_fail "config load good.yaml failed"
ctl rule list >"$IT_DIR/list-good.txt"
cat "$IT_DIR/list-good.txt"
grep -q '^web ' "$IT_DIR/list-good.txt" || it_fail "config load did not add web"
sleep 0.3
rate_window r3a r3b

it_stop "$S_PID" 10 INT
grep -q '"stopped": true' "$IT_DIR/sender.json" ||
  it_fail "the sender ran out before the last read: $(cat "$IT_DIR/sender.json")"
read_stats last
it_stop "$DP_PID" 20 TERM
it_report_table "$IT_DIR/report.json"

/usr/bin/python3 - "$IT_DIR" $RATE1 $RATE2 $RATE3 <<'EOF'
import json, sys
d = sys.argv[1]
want = [int(x) for x in sys.argv[2:5]]
fails = []
def rules(name):
    return {r["name"]: r for r in json.load(open("%s/%s.json" % (d, name)))["rules"]}
def t(name):
    return float(open("%s/%s.t" % (d, name)).read())
names = ["r1a", "r1b", "r2a", "r2b", "bad-before", "bad-after", "r3a", "r3b", "last"]
for n in names:
    for rule, r in rules(n).items():
        for unit in ("packets", "bytes"):
            m, p, x = r["matched_" + unit], r["passed_" + unit], r["dropped_" + unit]
            if m != p + x:
                fails.append("%s: %s matched_%s %d != passed + dropped %d" % (n, rule, unit, m, p + x))
rates = []
for (a, b), w in zip((("r1a", "r1b"), ("r2a", "r2b"), ("r3a", "r3b")), want):
    pa, pb = rules(a)["flood"], rules(b)["flood"]
    secs = t(b) - t(a)
    passed = (pb["passed_packets"] - pa["passed_packets"]) / secs
    offered = (pb["matched_packets"] - pa["matched_packets"]) / secs
    rates.append(passed)
    print("flood at %dpps: offered %.0f pps, admitted %.0f pps (over %.2f s)" % (w, offered, passed, secs))
    if abs(passed - w) > 0.25 * w:
        fails.append("admitted %.0f pps, not within 25%% of %d pps" % (passed, w))
ba, bb = rules("bad-before")["flood"], rules("bad-after")["flood"]
if not bb["matched_packets"] > ba["matched_packets"]:
    fails.append("counters stopped growing after the refused load")
final = {r["name"]: r for r in json.load(open(d + "/report.json"))["rules"]}["flood"]
last = rules("last")["flood"]
for c in ("matched_packets", "passed_packets", "dropped_packets"):
    if final[c] < last[c]:
        fails.append("REPORT.json %s %d below the last live read %d" % (c, final[c], last[c]))
if fails:
    print("FAIL: live_control: " + "; ".join(fails))
    sys.exit(1)
EOF
it_pass "rule set/add/del and config load change a running sluiced's limits as traffic flows"

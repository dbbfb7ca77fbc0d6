#!/usr/bin/env bash
# operator_reads: what an operator sees of a running sluiced while it limits real traffic,
# through `sluicectl` (--control) and Prometheus metrics (--metrics), as the traffic flows.
#
#   netns sl-tx-ID                       netns sl-dp-ID
#   sluice-sender --iface sltID ==veth== sldID <- net_af_xdp0 <- sluiced --control SOCK
#                                                  --metrics 127.0.0.1:0 (the netns' loopback)
#
# One source sends 3x the rate of rule `flood` (udp dst-port 9, key src-ip, 2 kpps, burst 200)
# for 4 s. Halfway, while packets arrive:
#   - `sluicectl stats --watch 0.3 --count 3`: three tables, flood's matched growing;
#   - `sluicectl stats --json`, 5 times: flood has dropped packets, and every read is a
#     consistent cut (matched == passed + dropped == conformed + exceeded, packets and bytes);
#   - GET /metrics inside the netns: flood's drops > 0, and matched == passed + dropped.
# Before: `sluicectl rule list` shows the running rule. After: REPORT.json counts at least what
# was read live, and the control socket is gone.
#
# Exit: 0 pass, 1 fail, 77 skip (not root, no veth, no AF_XDP in the kernel or DPDK, < 2 CPUs).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
it_init operator_reads
it_need_bin SLUICED SENDER SLUICECTL

[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (a main and a worker lcore)"
/usr/bin/python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
  it_skip "the kernel has no AF_XDP sockets"

RATE=2000 BURST=200 OFFER=6000 SECS=300
NS_DP=sl-dp-$IT_ID NS_TX=sl-tx-$IT_ID
DP_IF=sld$IT_ID TX_IF=slt$IT_ID
SOCK=$IT_DIR/ctl/sluiced.sock
it_netns_veth "$DP_IF" "$NS_DP" "$TX_IF" "$NS_TX"

cat >"$IT_DIR/rules.yaml" <<EOF
default: {action: pass}
rules:
  - {name: flood, match: {proto: udp, dst-port: 9}, key: src-ip, rate: ${RATE}pps, burst: $BURST,
     action: drop}
EOF

it_start_sluiced_af_xdp DP_PID "$NS_DP" "$DP_IF" --control "$SOCK" --metrics 127.0.0.1:0
PORT=$(grep -o '(port [0-9]*)' "$IT_DIR/sluiced.err" | head -1 | tr -dc 0-9)
[ -n "$PORT" ] || it_fail "sluiced did not log its metrics port"

"$SLUICECTL" --socket "$SOCK" rule list >"$IT_DIR/rules.txt" || it_fail "sluicectl rule list failed"
cat "$IT_DIR/rules.txt"
grep -q '^flood  .*src-ip  token-bucket  2kpps, burst 200  drop' "$IT_DIR/rules.txt" ||
  it_fail "rule list does not show the running rule"

it_rt_prefix RT
# shellcheck disable=SC2086
it_spawn S_PID "$IT_DIR/sender.json" "$IT_DIR/sender.err" $RT ip netns exec "$NS_TX" \
  taskset -c 0 "$SENDER" --iface "$TX_IF" --src-base 198.18.0.1 --dst 198.19.0.1 \
  --dst-port 9 --pps $OFFER --seconds $SECS
it_wait_for_matched "$SOCK" flood "$S_PID" 20
sleep 1

it_log "halfway: reading the running sluiced"
# --watch first: its tables must fall while traffic flows, and each read below can take half a
# second in the ASan build beside the real-time sender (five of them once outlasted the 4 s of
# traffic).
"$SLUICECTL" --socket "$SOCK" stats --watch 0.3 --count 3 >"$IT_DIR/watch.txt" ||
  it_fail "sluicectl stats --watch failed"
for i in 1 2 3 4 5; do
  "$SLUICECTL" --socket "$SOCK" stats --json >"$IT_DIR/live-$i.json" ||
    it_fail "sluicectl stats --json failed"
done
ip netns exec "$NS_DP" /usr/bin/python3 -c '
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode())
' "$PORT" >"$IT_DIR/metrics.txt" || it_fail "GET /metrics failed"

# The traffic lasts until the reads are done, however long they take (SECS only bounds it).
it_stop "$S_PID" 10 INT
grep -q '"stopped": true' "$IT_DIR/sender.json" ||
  it_fail "the sender ran out before the reads were done: $(cat "$IT_DIR/sender.json")"
sleep 0.3
it_stop "$DP_PID" 20
it_report_table "$IT_DIR/report.json"
[ ! -e "$SOCK" ] || it_fail "the control socket outlived sluiced"

/usr/bin/python3 - "$IT_DIR" <<'EOF'
import json, re, sys
d = sys.argv[1]
fails = []
def flood(j):
    return {r["name"]: r for r in j["rules"]}["flood"]
reads = [flood(json.load(open("%s/live-%d.json" % (d, i)))) for i in range(1, 6)]
for i, r in enumerate(reads, 1):
    for unit in ("packets", "bytes"):
        m, p, x = r["matched_" + unit], r["passed_" + unit], r["dropped_" + unit]
        c, e = r["conformed_" + unit], r["exceeded_" + unit]
        if m != p + x or m != c + e:
            fails.append("read %d: matched_%s %d != passed + dropped %d or conformed + exceeded %d"
                         % (i, unit, m, p + x, c + e))
print("live reads of flood (matched, dropped): " +
      ", ".join("(%d, %d)" % (r["matched_packets"], r["dropped_packets"]) for r in reads))
if reads[-1]["dropped_packets"] == 0: fails.append("no drops seen live at 3x the rate")
# (Growth is --watch's to show: these five reads can fall within one 20 ms publishing tick.)

# The counters tables' rows of flood; from the second table on, --watch follows each with a
# rates table ("per second" header) whose rows are skipped here.
tables, in_rates = [], False
for l in open(d + "/watch.txt"):
    head = l.strip()
    if head.startswith("per second"): in_rates = True
    elif head.startswith("rule "): in_rates = False
    elif l.startswith("flood ") and not in_rates: tables.append(l.split())
print("--watch: flood matched per table: %s" % [t[1] for t in tables])
if len(tables) != 3: fails.append("--watch --count 3 printed %d tables" % len(tables))
elif not int(tables[0][1]) < int(tables[2][1]): fails.append("--watch tables did not grow")

text = open(d + "/metrics.txt").read()
def metric(outcome):
    m = re.search(r'^sluice_packets_total\{rule="flood",outcome="%s"\} (\d+)$' % outcome, text, re.M)
    return int(m.group(1)) if m else None
mm, mp, md = metric("matched"), metric("passed"), metric("dropped")
print("metrics: flood matched %s passed %s dropped %s" % (mm, mp, md))
if None in (mm, mp, md): fails.append("metrics lack flood's packet counters")
elif md == 0 or mm != mp + md: fails.append("metrics: no drops, or matched != passed + dropped")

final = flood(json.load(open(d + "/report.json")))
if (final["matched_packets"] < reads[-1]["matched_packets"]
        or final["dropped_packets"] < reads[-1]["dropped_packets"]):
    fails.append("REPORT.json counts below what was read live")
if fails:
    print("FAIL: operator_reads: " + "; ".join(fails))
    sys.exit(1)
EOF
it_pass "sluicectl and /metrics show live, consistent counters of a rule limiting real traffic"

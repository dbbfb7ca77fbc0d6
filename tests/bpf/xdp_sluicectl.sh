#!/usr/bin/env bash
# sluicectl driving the XDP backend through its pinned maps (issue 12 item 4), on a veth pair
# between two namespaces this test creates: `xdp attach` (a missing interface: exit 2; a second
# attach: exit 1), then with `--xdp IFACE`: rule list/show, stats (counts equal the frames
# sent), rule set (the bucket kept: no refill), rule add/del, config save/check/diff/load (and
# their refusal of a shaping rule and of tables beyond the memory of sluicectl's cgroup),
# flows top (a 2000 pps source above a 200 pps one), a rule's max-flows and flows_evicted in
# stats, and `xdp detach` (nothing attached or
# pinned after; --xdp then fails with exit 1).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/../integration/lib.sh"
# grep -q reads sluicectl's output from a here-string, not a pipe: it exits at its match, and
# under pipefail the writer's SIGPIPE would turn a match into a failure.
it_init xdp_sluicectl
it_need_bin SLUICECTL SENDER

A="sl-ca-$IT_ID" B="sl-cb-$IT_ID" RX="xca$IT_ID" TX="xcb$IT_ID"
it_netns_veth "$RX" "$A" "$TX" "$B"
# A failed run must not leave its pins behind (the namespaces go, the bpffs pins would not).
trap 'rc=$?; rm -rf "/sys/fs/bpf/sluice/$RX"; rmdir /sys/fs/bpf/sluice 2>/dev/null || true; (exit $rc); it_cleanup' EXIT
# nsenter --net, not ip netns exec: the latter mounts a private /sys, and with it a private
# bpffs whose pins vanish when the command ends.
ctl() { nsenter --net="/run/netns/$A" "$SLUICECTL" "$@"; }
status_of() { local rc=0; "$@" >"$IT_DIR/out" 2>"$IT_DIR/err" || rc=$?; echo "$rc"; }
send() {  # N frames of flow 198.18.0.1 -> udp port 9
  ip netns exec "$B" "$SENDER" --iface "$TX" --pps 1000 --packets "$1" >/dev/null
}
# The matched packets of rule $1 in `stats --json`.
matched() {
  ctl --xdp "$RX" stats --json | /usr/bin/python3 -c '
import json, sys
print(next(r["matched_packets"] for r in json.load(sys.stdin)["rules"] if r["name"] == sys.argv[1]))
' "$1"
}

cat >"$IT_DIR/rules.yaml" <<'Y'
default: {action: pass}
rules:
  - {name: udp9, match: {proto: udp, dst-port: 9}, key: src-ip, algorithm: token-bucket, rate: 1pps, burst: 5, action: drop}
Y
cat >"$IT_DIR/extra.yaml" <<'Y'
rules:
  - {name: tcp80, match: {proto: tcp, dst-port: 80}, key: none, algorithm: token-bucket, rate: 100pps, burst: 10, action: drop}
Y
cat >"$IT_DIR/next.yaml" <<'Y'
default: {action: pass}
rules:
  - {name: udp9, match: {proto: udp, dst-port: 9}, key: src-ip, algorithm: token-bucket, rate: 1pps, burst: 5, action: drop}
  - {name: dns, match: {proto: udp, dst-port: 53}, key: none, algorithm: token-bucket, rate: 10pps, burst: 10, action: drop}
Y

[ "$(status_of ctl xdp attach "no-such-$IT_ID" --config "$IT_DIR/rules.yaml")" = 2 ] ||
  it_fail "attach on a missing interface: want exit 2, got $(cat "$IT_DIR/err")"
[ "$(status_of ctl xdp attach "$RX" --mode native --config "$IT_DIR/rules.yaml")" = 0 ] ||
  it_fail "xdp attach: $(cat "$IT_DIR/err")"
[ -e "/sys/fs/bpf/sluice/$RX/sl_flow_tables" ] || it_fail "no pinned maps after attach"
[ "$(status_of ctl xdp attach "$RX" --config "$IT_DIR/rules.yaml")" = 1 ] ||
  it_fail "a second attach: want exit 1, got $(cat "$IT_DIR/err")"
grep -q "already attached" "$IT_DIR/err" || it_fail "second attach: $(cat "$IT_DIR/err")"

grep -q udp9 <<<"$(ctl --xdp "$RX" rule list)" || it_fail "rule list has no udp9"
grep -q "burst: 5" <<<"$(ctl --xdp "$RX" rule show udp9)" || it_fail "rule show: $(ctl --xdp "$RX" rule show udp9)"

send 40
[ "$(matched udp9)" = 40 ] || it_fail "stats: udp9 matched $(matched udp9), sent 40"

# A burst raise keeps the bucket (empty after 40 frames): the next frames are refused still.
ctl --xdp "$RX" rule set udp9 --burst 50 >/dev/null || it_fail "rule set"
grep -q "burst: 50" <<<"$(ctl --xdp "$RX" rule show udp9)" || it_fail "rule set did not take"
[ "$(matched udp9)" = 40 ] || it_fail "rule set lost udp9's counters"

ctl --xdp "$RX" rule add "$IT_DIR/extra.yaml" >/dev/null || it_fail "rule add"
grep -q tcp80 <<<"$(ctl --xdp "$RX" rule list)" || it_fail "rule add: no tcp80"
ctl --xdp "$RX" rule del tcp80 >/dev/null || it_fail "rule del"
list=$(ctl --xdp "$RX" rule list) || it_fail "rule list after rule del"
if grep -q tcp80 <<<"$list"; then it_fail "rule del: tcp80 still there"; fi

ctl --xdp "$RX" config save "$IT_DIR/saved.yaml" >/dev/null || it_fail "config save"
"$SLUICECTL" config check "$IT_DIR/saved.yaml" >/dev/null || it_fail "config check of the saved file"
grep -q "+ dns" <<<"$(ctl --xdp "$RX" config diff "$IT_DIR/next.yaml")" ||
  it_fail "config diff: $(ctl --xdp "$RX" config diff "$IT_DIR/next.yaml")"
# A shaping rule, which the XDP program cannot run: the dry run says so as the load would
# (exit 2, the same words), and neither changes the rules.
cat >"$IT_DIR/shaping.yaml" <<'Y'
rules:
  - {name: shape, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, algorithm: leaky-bucket, max-delay: 10ms}
Y
[ "$(status_of ctl --xdp "$RX" config diff "$IT_DIR/shaping.yaml")" = 2 ] ||
  it_fail "config diff of a shaping rule on XDP: want exit 2, got: $(cat "$IT_DIR/err")"
diff_err=$(cat "$IT_DIR/err")
[ "$(status_of ctl --xdp "$RX" config load "$IT_DIR/shaping.yaml")" = 2 ] ||
  it_fail "config load of a shaping rule on XDP: want exit 2, got: $(cat "$IT_DIR/err")"
[ "$diff_err" = "$(cat "$IT_DIR/err")" ] ||
  it_fail "config diff and config load refuse differently: '$diff_err' against '$(cat "$IT_DIR/err")'"
grep -q "shap" <<<"$diff_err" || it_fail "config diff's refusal does not say why: $diff_err"
# config check with --xdp holds the file to the same (no program needed); without, sluiced's.
[ "$(status_of ctl --xdp "$RX" config check "$IT_DIR/shaping.yaml")" = 2 ] ||
  it_fail "config check --xdp of a shaping rule: want exit 2, got: $(cat "$IT_DIR/out" "$IT_DIR/err")"
grep -qF "shaping.yaml: ${diff_err#sluicectl: }" "$IT_DIR/err" ||
  it_fail "config check --xdp refuses otherwise than config load: $(cat "$IT_DIR/err")"
list=$(ctl --xdp "$RX" rule list) || it_fail "rule list after the refused shaping rule"
if grep -q "^shape" <<<"$list"; then it_fail "a refused load changed the rules: $list"; fi
ctl --xdp "$RX" config load "$IT_DIR/next.yaml" >/dev/null || it_fail "config load"
grep -q dns <<<"$(ctl --xdp "$RX" rule list)" || it_fail "config load: no dns"

# Flow tables beyond the memory sluicectl may have (its cgroup's limit): an XDP table is kernel
# memory, all of it taken when the map is made (2M flows: 488 MiB of sets). Refused by the dry
# run and the load alike, with the figures, before any map is made; the rules stay.
it_memory_cgroup CG $((256 * 1024 * 1024))
cat >"$IT_DIR/big.yaml" <<'Y'
default: {action: pass}
rules:
  - {name: udp9, match: {proto: udp, dst-port: 9}, key: src-ip, algorithm: token-bucket, rate: 1pps, burst: 5, action: drop}
  - {name: dns, match: {proto: udp, dst-port: 53}, key: none, algorithm: token-bucket, rate: 10pps, burst: 10, action: drop}
  - {name: big, match: {proto: tcp}, key: src-ip, algorithm: token-bucket, rate: 10pps, burst: 10, action: drop, max-flows: 2000000}
Y
ctl_in_cgroup() {
  bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" \
    nsenter --net="/run/netns/$A" "$SLUICECTL" "$@"
}
# check counts every keyed table as a first attach makes them (udp9's 65,536 flows too: 504.3
# MiB); diff and load only the new one, udp9's being kept.
for verb in check diff load; do
  [ "$(status_of ctl_in_cgroup --xdp "$RX" config $verb "$IT_DIR/big.yaml")" = 2 ] ||
    it_fail "config $verb of 2M flows in 256 MiB: want exit 2, got: $(cat "$IT_DIR/out" "$IT_DIR/err")"
  need="488.3 MiB"
  [ $verb = check ] && need="504.3 MiB"
  grep -q "flow tables need $need .* of memory available; lower max-flows$" "$IT_DIR/err" ||
    it_fail "config $verb of 2M flows in 256 MiB does not say why: $(cat "$IT_DIR/err")"
  # The XDP backend's default capacity is fixed: the advice must not name sluiced's --flows.
  if grep -q -- "--flows" "$IT_DIR/err"; then
    it_fail "config $verb's refusal names --flows, which the XDP backend has not: $(cat "$IT_DIR/err")"
  fi
done
list=$(ctl --xdp "$RX" rule list) || it_fail "rule list after the refused load of big.yaml"
if grep -q "^big" <<<"$list"; then it_fail "a load refused for memory changed the rules: $list"; fi
[ "$(matched udp9)" = 40 ] || it_fail "config load lost udp9's counters (state identity kept)"

# flows top: two sources at 2000 and 200 pps while the table is read twice; the busier first.
ip netns exec "$B" "$SENDER" --iface "$TX" --pps 2000 --seconds 2 --src-base 198.18.0.1 >/dev/null &
HEAVY=$!
ip netns exec "$B" "$SENDER" --iface "$TX" --pps 200 --seconds 2 --src-base 198.18.0.2 >/dev/null &
LIGHT=$!
sleep 0.7
ctl --xdp "$RX" flows top 5 --rule udp9 >"$IT_DIR/top" 2>&1 || it_fail "flows top: $(cat "$IT_DIR/top")"
ctl --xdp "$RX" flows top 1 --by bps >"$IT_DIR/top1" 2>&1 || it_fail "flows top --by bps: $(cat "$IT_DIR/top1")"
wait "$HEAVY" "$LIGHT"
awk 'NR == 2 {print $1, $2}' "$IT_DIR/top" | grep -qx "udp9 198.18.0.1" ||
  it_fail "flows top: the 2000 pps source is not first: $(cat "$IT_DIR/top")"
awk 'NR == 3 {print $2}' "$IT_DIR/top" | grep -qx "198.18.0.2" ||
  it_fail "flows top: the 200 pps source is not second: $(cat "$IT_DIR/top")"
# Its rate, over a 250 ms read, within 25% of 2000 pps (the sender is paced).
awk 'NR == 2 {exit !($3 > 1500 && $3 < 2500)}' "$IT_DIR/top" ||
  it_fail "flows top: the heavy source's rate: $(cat "$IT_DIR/top")"
[ "$(wc -l <"$IT_DIR/top1")" = 2 ] || it_fail "flows top 1: $(cat "$IT_DIR/top1")"
[ "$(status_of ctl --xdp "$RX" flows top 3 --rule nope)" = 2 ] ||
  it_fail "flows top --rule nope: want exit 2, got $(cat "$IT_DIR/err")"

# max-flows: a rule of 4 flows that 20 sources reach holds at most 4 and counts the others'
# evictions in stats (each rule has its own table: udp9's flows stay).
cat >"$IT_DIR/few.yaml" <<'Y'
rules:
  - {name: few, match: {proto: udp, dst-port: 7}, key: src-ip, algorithm: token-bucket, rate: 1pps, burst: 1, action: drop, max-flows: 4}
Y
ctl --xdp "$RX" rule add "$IT_DIR/few.yaml" >/dev/null || it_fail "rule add few"
ip netns exec "$B" "$SENDER" --iface "$TX" --pps 1000 --packets 20 --flows 20 --dst-port 7 \
  --src-base 198.19.0.1 >/dev/null
ctl --xdp "$RX" stats --json | /usr/bin/python3 -c '
import json, sys
rules = {r["name"]: r for r in json.load(sys.stdin)["rules"]}
few, udp9 = rules["few"], rules["udp9"]
bad = []
if few["matched_packets"] != 20: bad.append("few matched %d, sent 20" % few["matched_packets"])
if few["active_flows"] > 4: bad.append("few holds %d flows, max-flows 4" % few["active_flows"])
# a flow may go only once idle >= 1 ms (else the new one gets the overflow action), as on
# sluiced: at 1000 pps most of the 16 flows over the cap are evictions
if few["flows_evicted"] < 10: bad.append("few evicted %d flows, want >= 10" % few["flows_evicted"])
if udp9["flows_evicted"] != 0: bad.append("udp9 evicted %d flows" % udp9["flows_evicted"])
sys.exit("; ".join(bad) or None)
' || it_fail "max-flows and flows_evicted over sluicectl stats"

[ "$(status_of ctl xdp detach "$RX")" = 0 ] || it_fail "xdp detach: $(cat "$IT_DIR/err")"
[ ! -e "/sys/fs/bpf/sluice/$RX" ] || it_fail "pins left after detach"
# No empty root left either (another interface's pins, another sluice's, may keep it).
[ ! -e /sys/fs/bpf/sluice ] || [ -n "$(ls -A /sys/fs/bpf/sluice)" ] ||
  it_fail "an empty /sys/fs/bpf/sluice left after detach"
ip -n "$A" link show "$RX" | grep -q "xdp" && it_fail "a program is still attached"
[ "$(status_of ctl --xdp "$RX" stats)" = 1 ] || it_fail "--xdp after detach: want exit 1"
it_pass "attach, rule list/show/set/add/del, stats, config save/check/diff/load, flows top, max-flows, detach"

#!/usr/bin/env bash
# sluice demo.
#
#   scripts/demo.sh [RULES.yaml]            live (default; needs root): ~30 s
#   scripts/demo.sh --replay [RULES.yaml]   offline replay: no NIC, no hugepages, no root
#   scripts/demo.sh --xdp [RULES.yaml]      the live demo on the XDP backend (root): ~30 s
#   (BUILD=dir uses another build directory; SLUICE_DEMO_PMD=af_packet skips AF_XDP)
#
# Live: creates two network namespaces joined by a veth pair, runs the DPDK dataplane
# `sluiced` on one end through net_af_xdp (net_af_packet if AF_XDP cannot start), one port,
# so what passes goes back out of it, with examples/rules-live.yaml, and drives
# `sluice-sender` from the other namespace: first every class of traffic below its limit,
# then above it, then an operator raising a limit with `sluicectl rule set` while traffic
# flows (`sluicectl stats --watch` before and after). sluiced prints its per-rule counters
# every second; before it stops, `sluicectl` reads the running rules and counters through
# sluiced's control socket; then it stops on SIGINT and prints the final ones. Everything it created is removed on exit (trap), however
# it ends. All traffic stays on the veth pair, with addresses from 198.18.0.0/15 and
# 192.0.2.0/24.
#
# XDP: the same namespaces, traffic and rate change, enforced by the XDP program instead:
# `sluicectl xdp attach IFACE --config FILE`, `sluicectl --xdp IFACE stats` after each phase,
# `rule set` while traffic flows, `flows top` (the busiest sources), then `sluicectl xdp
# detach` (nothing pinned).
# XDP cannot delay a packet, so the shaping rule of rules-live.yaml is refused (shown), and
# tenant-a is policed at its rate instead.
#
# Replay: generates a trace with flows below and above the limits of examples/rules.yaml,
# runs it through `sluiced --replay` (the same parse -> classify -> limit -> shape code as the
# live dataplane, with capture timestamps as the clock) and prints the per-rule counters.
set -euo pipefail

cd "$(dirname "$0")/.."
MODE=live
if [[ ${1:-} == --replay || ${1:-} == --xdp ]]; then
  MODE=${1#--}
  shift
fi
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BUILD=${BUILD:-build}

if [[ $MODE != replay && $(id -u) != 0 ]]; then
  echo "demo: the live demo needs root (network namespaces, veth, AF_XDP); running the replay" >&2
  echo "      demo instead (scripts/demo.sh --replay). Run as root for the live one." >&2
  MODE=replay
fi

if [[ -f scripts/setup-deps.sh ]]; then
  bash scripts/setup-deps.sh
fi
if [[ ! -f "$BUILD/build.ninja" ]]; then
  meson setup "$BUILD" >/dev/null
fi
ninja -C "$BUILD" dataplane/sluiced control/sluicectl tools/sluice-tracegen tools/sluice-sender >/dev/null

SLUICED="$BUILD/dataplane/sluiced"
SLUICECTL="$BUILD/control/sluicectl"
TRACEGEN="$BUILD/tools/sluice-tracegen"
SENDER="$BUILD/tools/sluice-sender"

# ------------------------------------------------------------------------------- replay
if [[ $MODE == replay ]]; then
  RULES=${1:-examples/rules.yaml}
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT

  # Two seconds of traffic, four kinds of flows.
  gen() { "$TRACEGEN" --packets "$1" --pps "$2" --start-ns 1000000000 "${@:3}"; }
  gen 800  400  --flows 8 --src-base 10.2.0.1 --dst-port 53 --out "$TMP/dns-ok.pcap"     # 50/s per source
  gen 2000 1000 --flows 2 --src-base 10.3.0.1 --dst-port 53 --out "$TMP/dns-flood.pcap"  # 500/s per source
  gen 1600 800  --proto tcp --src-base 10.4.0.1 --dst-port 80 --size 128 \
      --malformed-every 100 --out "$TMP/web.pcap"                                        # 800/s, some broken
  gen 1500 750  --flows 4 --src-base 10.1.0.1 --dst-port 5000 --size 1000 --poisson \
      --out "$TMP/tenant.pcap"                                                           # ~6 Mbit/s
  "$TRACEGEN" --out "$TMP/in.pcap" --merge "$TMP/dns-ok.pcap" --merge "$TMP/dns-flood.pcap" \
      --merge "$TMP/web.pcap" --merge "$TMP/tenant.pcap"

  echo "== rules: $RULES"
  echo "== traffic: 8 DNS sources at 50/s (under the limit), 2 at 500/s (over it),"
  echo "   web at 800/s (over 500/s, 1% malformed), tenant A at ~6 Mbit/s (shaped to 4 Mbit/s)"
  echo
  "$SLUICED" --replay "$TMP/in.pcap" --out "$TMP/out.pcap" --report "$TMP/report.json" \
      --config "$RULES" --hash-seed 1 --stats
  echo
  echo "(REPORT.json has the same counters, in packets and bytes; OUT.pcap the packets that left,"
  echo " shaped ones stamped with their departure time.)"
  exit 0
fi

# --------------------------------------------------------------------------------- live
RULES=${1:-examples/rules-live.yaml}
# The namespace, veth, process and clean-up helpers of the integration tests.
# shellcheck source=tests/integration/lib.sh
source tests/integration/lib.sh
set +E
trap - ERR
IT_NAME=demo
IT_ID=$$
IT_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")
trap 'rc=$?; [[ $MODE != xdp ]] || xdp_unpin; (exit $rc); it_cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
[[ $(nproc) -ge 2 ]] || { echo "demo: the live demo needs 2 CPUs; try scripts/demo.sh --replay" >&2; exit 1; }

NS_DP=sluice-demo-dp-$IT_ID NS_TX=sluice-demo-tx-$IT_ID
DP_IF=sdemo$IT_ID TX_IF=tdemo$IT_ID
it_netns_veth "$DP_IF" "$NS_DP" "$TX_IF" "$NS_TX"
DP_WHAT=sluiced
[[ $MODE == live ]] || DP_WHAT="the XDP program"
echo "== namespaces $NS_TX ($TX_IF: sluice-sender) <-veth-> $NS_DP ($DP_IF: $DP_WHAT)"
echo "== rules: $RULES"

# XDP: sluicectl in the dataplane namespace through nsenter --net, not ip netns exec (which
# mounts a private /sys, and with it a bpffs whose pins vanish when the command ends).
CTL_XDP=(nsenter --net="/run/netns/$NS_DP" "$SLUICECTL")
xdp_unpin() {  # on exit, however the demo ends: nothing attached, nothing pinned
  if [[ -e /sys/fs/bpf/sluice/$DP_IF ]]; then
    "${CTL_XDP[@]}" xdp detach "$DP_IF" >/dev/null 2>&1 || true
    rm -rf "/sys/fs/bpf/sluice/$DP_IF"
    rmdir /sys/fs/bpf/sluice 2>/dev/null || true
  fi
}
if [[ $MODE == xdp ]]; then
  echo "== sluicectl xdp attach $DP_IF --config $RULES"
  if ! "${CTL_XDP[@]}" xdp attach "$DP_IF" --config "$RULES" 2>"$IT_DIR/attach.err"; then
    cat "$IT_DIR/attach.err"
    grep -q "DPDK backend" "$IT_DIR/attach.err" || exit 1
    # XDP cannot hold a packet: the shapers become policers at the same rate (drop above it).
    sed -e 's/algorithm: leaky-bucket/algorithm: token-bucket/' -e 's/max-delay: .*/action: drop/' \
      -e 's/is shaped to/is policed to/' "$RULES" >"$IT_DIR/rules-xdp.yaml"
    RULES=$IT_DIR/rules-xdp.yaml
    echo "== so the shaping rule is policed instead: sluicectl xdp attach $DP_IF --config $RULES"
    "${CTL_XDP[@]}" xdp attach "$DP_IF" --config "$RULES"
  fi
  CTL=("${CTL_XDP[@]}" --xdp "$DP_IF")
  "${CTL[@]}" rule list
fi

# sluiced: AF_XDP first, AF_PACKET if that does not come up.
DP_PID=""
if [[ $MODE == live ]]; then
  start_sluiced() {  # start_sluiced VDEV
    local prefix
    it_prefix prefix
    : >"$IT_DIR/sluiced.out"
    # shellcheck disable=SC2046
    it_spawn DP_PID "$IT_DIR/sluiced.out" "$IT_DIR/sluiced.err" \
      ip netns exec "$NS_DP" "$SLUICED" -l 0,1 $(it_eal_common "$prefix") --vdev "$1" -- \
      --config "$RULES" --report "$IT_DIR/report.json" --stats-interval 1 \
      --control "$IT_DIR/sluiced.sock"
    local rc=0
    it_try_wait_for "$IT_DIR/sluiced.err" 'worker\(s\) running' 20 "$DP_PID" || rc=$?
    if [[ $rc != 0 ]]; then
      kill -INT "$DP_PID" 2>/dev/null || true
      it_wait_exit "$DP_PID" 10
      return 1
    fi
  }
  if [[ ${SLUICE_DEMO_PMD:-af_xdp} == af_xdp ]] && start_sluiced "net_af_xdp0,iface=$DP_IF"; then
    echo "== sluiced: net_af_xdp on $DP_IF"
  else
    if [[ ${SLUICE_DEMO_PMD:-af_xdp} == af_xdp ]]; then
      echo "== AF_XDP did not start ($(grep -m1 -iE 'error|fail' "$IT_DIR/sluiced.err" || echo "no reason given")); using net_af_packet"
    fi
    start_sluiced "net_af_packet0,iface=$DP_IF" || {
      cat "$IT_DIR/sluiced.err" >&2
      echo "demo: sluiced did not start" >&2
      exit 1
    }
    echo "== sluiced: net_af_packet on $DP_IF"
  fi

  # sluiced's counters tables, every second, with the time since the start above each.
  tail --pid="$DP_PID" -s 0.1 -n +1 -F "$IT_DIR/sluiced.out" 2>/dev/null | {
    n=0
    while IFS= read -r line; do
      [[ $line == "rule "* ]] && n=$((n + 1))
      # Quiet while sluicectl's own tables are on screen (phase 3).
      [[ -e $IT_DIR/quiet ]] && continue
      [[ $line == "rule "* ]] && printf '\n--- t = %d s\n' $((n - 1))
      printf '%s\n' "$line"
    done
  } &
  SHOW_PID=$!
fi

it_rt_prefix RT
# send NAME SECONDS SENDER-OPTIONS...: one class of traffic, in the background.
SENDERS=()
send() {
  local name=$1 secs=$2
  shift 2
  # shellcheck disable=SC2086
  $RT ip netns exec "$NS_TX" taskset -c 0 "$SENDER" --iface "$TX_IF" --seconds "$secs" "$@" \
    >"$IT_DIR/$name.json" 2>"$IT_DIR/$name.err" &
  SENDERS+=($!)
  IT_PIDS+=($!)
}
phase_stats() {  # XDP: the counters so far (sluiced prints its own every second)
  if [[ $MODE == xdp ]]; then echo "== sluicectl --xdp $DP_IF stats"; "${CTL[@]}" stats; fi
}
wait_senders() {
  local p
  for p in "${SENDERS[@]}"; do
    wait "$p" || echo "demo: a sender failed" >&2
    it_forget "$p"
  done
  SENDERS=()
}
dns_ok()    { send "$1" "$2" --flows 8 --src-base 198.18.1.1 --dst 192.0.2.53 --dst-port 53 --pps 400; }
dns_flood() { send "$1" "$2" --flows 2 --src-base 198.18.2.1 --dst 192.0.2.53 --dst-port 53 --pps 1000; }
web()       { send "$1" "$2" --proto tcp --src-base 198.18.3.1 --dst 192.0.2.80 --dst-port 80 --size 128 --pps "$3"; }
tenant()    { send "$1" "$2" --flows 4 --src-base 198.18.100.1 --dst 192.0.2.100 --dst-port 5000 --size 1000 --pps "$3"; }

sleep 1.2
echo
echo "== phase 1 (5 s), everything under its limit: 8 DNS sources at 50/s each (limit 100/s),"
TENANT_LIMIT="shaped to 4 Mbit/s" TENANT_OVER="delayed, and dropped where the wait would exceed 5 ms"
[[ $MODE == live ]] || TENANT_LIMIT="policed to 4 Mbit/s" TENANT_OVER="dropped above 4 Mbit/s"
echo "   web at 300/s (marked above 500/s), tenant A at 2 Mbit/s ($TENANT_LIMIT)"
dns_ok p1-dns 5
web p1-web 5 300
tenant p1-tenant 5 250
wait_senders
phase_stats

echo
echo "== phase 2 (6 s), over the limits: + 2 DNS sources at 500/s each, web at 1000/s,"
echo "   tenant A at 8 Mbit/s ($TENANT_OVER)"
dns_ok p2-dns 6
dns_flood p2-flood 6
web p2-web 6 1000
tenant p2-tenant 6 1000
wait_senders
phase_stats

# Phase 3: an operator raises a limit while traffic flows, and the dataplane follows at once.
[[ $MODE == xdp ]] || CTL=("$SLUICECTL" --socket "$IT_DIR/sluiced.sock")
echo
echo "== phase 3 (5 s): the 2 DNS floods again (500/s each); an operator raises dns-per-source"
echo "   from 100/s to 300/s per source while they run, and its passed rate follows"
touch "$IT_DIR/quiet"
dns_flood p3-flood 5
sleep 0.5
echo "== sluicectl stats --watch 1 --count 2   (before: ~200 passed/s)"
"${CTL[@]}" stats --watch 1 --count 2
echo "== sluicectl rule set dns-per-source --rate 300pps"
"${CTL[@]}" rule set dns-per-source --rate 300pps
echo "== sluicectl stats --watch 1 --count 2   (after: ~600 passed/s)"
"${CTL[@]}" stats --watch 1 --count 2
if [[ $MODE == xdp ]]; then
  echo "== sluicectl --xdp $DP_IF flows top 5   (the two floods, at 500/s each)"
  "${CTL[@]}" flows top 5
fi
rm -f "$IT_DIR/quiet"
wait_senders
sleep 1.2

if [[ $MODE == xdp ]]; then
  echo
  echo "== sluicectl --xdp $DP_IF stats (final)"
  "${CTL[@]}" stats --json >"$IT_DIR/stats.json"
  "${CTL[@]}" stats
  echo "== sluicectl xdp detach $DP_IF"
  "${CTL_XDP[@]}" xdp detach "$DP_IF"
  if [[ -e /sys/fs/bpf/sluice/$DP_IF ]]; then echo "demo: pins left after detach" >&2; exit 1; fi
  echo "   (nothing attached to $DP_IF, nothing pinned under /sys/fs/bpf/sluice)"
  echo
  /usr/bin/python3 - "$IT_DIR" <<'EOF'
import json, sys, glob, os
d = sys.argv[1]
sent = {os.path.basename(f)[:-5]: json.load(open(f)) for f in sorted(glob.glob(d + "/p*.json"))}
print("sent: " + ", ".join("%s %d pkts (%.0f pps)" % (k, v["packets"], v["achieved_pps"])
                           for k, v in sent.items()))
r = {x["name"]: x for x in json.load(open(d + "/stats.json"))["rules"]}
dns, web, ten = r["dns-per-source"], r["web-mark"], r["tenant-a"]
print("dns-per-source: %d of %d queries dropped" % (dns["dropped_packets"], dns["matched_packets"]))
print("web-mark:       %d of %d packets re-marked AF11" % (web["marked_packets"], web["matched_packets"]))
print("tenant-a:       %d of %d packets dropped above its rate (XDP polices, never delays)"
      % (ten["dropped_packets"], ten["matched_packets"]))
EOF
  echo
  echo "(scripts/demo.sh runs the same demo on the DPDK dataplane, which shapes tenant-a.)"
  exit 0
fi

# The same figures through the control socket, as an operator reads a running sluiced.
echo
echo "== sluicectl --socket $IT_DIR/sluiced.sock rule list"
"$SLUICECTL" --socket "$IT_DIR/sluiced.sock" rule list
echo "== sluicectl --socket $IT_DIR/sluiced.sock stats"
"$SLUICECTL" --socket "$IT_DIR/sluiced.sock" stats

echo
echo "== stopping sluiced (SIGINT): final counters"
it_stop "$DP_PID" 20 INT
wait "$SHOW_PID" 2>/dev/null || true
echo
/usr/bin/python3 - "$IT_DIR" <<'EOF'
import json, sys, glob, os
d = sys.argv[1]
sent = {}
for f in sorted(glob.glob(d + "/p*.json")):
    s = json.load(open(f))
    sent[os.path.basename(f)[:-5]] = s
print("sent: " + ", ".join("%s %d pkts (%.0f pps)" % (k, v["packets"], v["achieved_pps"])
                           for k, v in sent.items()))
r = {x["name"]: x for x in json.load(open(d + "/report.json"))["rules"]}
dns, web, ten = r["dns-per-source"], r["web-mark"], r["tenant-a"]
print("dns-per-source: %d of %d queries dropped, %d sources seen"
      % (dns["dropped_packets"], dns["matched_packets"], dns["active_flows"]))
print("web-mark:       %d of %d packets re-marked AF11" % (web["marked_packets"], web["matched_packets"]))
print("tenant-a:       %d of %d packets delayed, %d dropped (would have waited > 5 ms)"
      % (ten["delayed_packets"], ten["matched_packets"], ten["dropped_packets"]))
EOF
echo
echo "(scripts/demo.sh --replay runs the same kinds of rules offline on a generated trace.)"

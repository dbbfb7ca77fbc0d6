#!/usr/bin/env bash
# unit_caps: the capabilities sluiced@.service grants are the ones sluiced needs, and no more.
# unit_systemd.sh runs the unit under systemd on net_pcap, which needs none of them; the
# capabilities matter for net_af_xdp on a veth, so this test runs sluiced as the unit would:
# its ExecStart= line with the example profile's EAL arguments and options, root's uid
# with the unit's CapabilityBoundingSet, NoNewPrivileges, and systemd's default RLIMIT_MEMLOCK
# (8 MiB; the unit sets no LimitMEMLOCK=), through setpriv and prlimit, on net_af_xdp over a
# veth in a network namespace of its own:
#   - with the unit's set, sluiced starts (its effective set is exactly that), sluicectl under
#     the same bounding set reads its rules, the unit's ExecReload= line loads a changed rules
#     file into the same process (once sluicectl has `config load`), and SIGTERM stops it
#     with status 0;
#   - with any one of those capabilities taken away, sluiced fails to start: each is needed.
# Exit: 0 pass, 1 fail, 77 skip (not root, no veth or AF_XDP, no net_af_xdp driver, < 2 CPUs).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/../integration/lib.sh"
it_init unit_caps
# The unit does not set it: libxdp tries its dispatcher first, as it would under systemd.
unset LIBXDP_SKIP_DISPATCHER
it_need_bin SLUICED SLUICECTL
[ "$(nproc)" -ge 2 ] || it_skip "needs 2 CPUs (a main and a worker lcore)"
/usr/bin/python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
  it_skip "the kernel has no AF_XDP sockets"
for t in setpriv prlimit capsh; do command -v $t >/dev/null || it_skip "$t is not installed"; done

UNIT=$(dirname "$0")/../../systemd/sluiced@.service.in
read -ra UNIT_CAPS <<<"$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT")"
((${#UNIT_CAPS[@]} > 0)) || it_fail "$UNIT has no CapabilityBoundingSet="
grep -q '^NoNewPrivileges=yes$' "$UNIT" || it_fail "$UNIT lacks NoNewPrivileges=yes"
! grep -q '^LimitMEMLOCK=' "$UNIT" || it_fail "the unit sets LimitMEMLOCK=: make this test use it"
MEMLOCK=$((8 << 20))
echo "unit grants: ${UNIT_CAPS[*]}"

NS=sl-cap-$IT_ID DP_IF=slc$IT_ID PEER_IF=slp$IT_ID
it_netns "$NS"
it_veth "$DP_IF" "$NS" "$PEER_IF" "$NS"
cat >"$IT_DIR/rules.yaml" <<'YAML'
default: {action: pass}
rules:
  - {name: capped, match: {proto: udp}, key: src-ip, rate: 1kpps, burst: 100, action: drop}
YAML

# bounding CAP...: setpriv's --bounding-set for exactly these capabilities.
bounding() {
  local b="-all" c
  for c in "$@"; do b+=",+$(echo "${c#CAP_}" | tr '[:upper:]' '[:lower:]')"; done
  echo "$b"
}

# The unit's ExecStart= with the example profile (systemd/example.conf), as systemd would
# expand it for an instance: the profile's variables split on whitespace, %t = /run, %i = the
# instance; here the interface is the test's veth end and the paths are the test's.
PROFILE=$(dirname "$0")/../../systemd/example.conf
EAL_ARGS=$(sed -n 's/^SLUICED_EAL_ARGS="\(.*\)"$/\1/p' "$PROFILE")
SL_ARGS=$(sed -n 's/^SLUICED_ARGS="\(.*\)"$/\1/p' "$PROFILE")
EXEC_START=$(sed -n 's/^ExecStart=//p' "$UNIT")
[ -n "$EAL_ARGS" ] && [ -n "$EXEC_START" ] || it_fail "no SLUICED_EAL_ARGS in $PROFILE or no ExecStart= in $UNIT"
echo "ExecStart=$EXEC_START"
echo "profile: SLUICED_EAL_ARGS=\"$EAL_ARGS\" SLUICED_ARGS=\"$SL_ARGS\""

# exec_start PREFIX SOCK: the command line, in EXEC_CMD.
exec_start() {
  local eal=${EAL_ARGS//iface=eth1/iface=$DP_IF} line
  eal=${eal//--file-prefix sluice-eth1/--file-prefix $1}
  [[ $eal == *"iface=$DP_IF"* && $eal == *"--file-prefix $1"* ]] ||
    it_fail "the example profile no longer names iface=eth1 and --file-prefix sluice-eth1"
  line=${EXEC_START//@BINDIR@\/sluiced/$SLUICED}
  line=${line//@SYSCONFDIR@\/sluice\/%i.yaml/$IT_DIR/rules.yaml}
  line=${line//%t\/sluice\/%i.sock/$2}
  line=${line//\$SLUICED_EAL_ARGS/$eal}
  line=${line//\$SLUICED_ARGS/$SL_ARGS}
  [[ $line != *[@%\$]* ]] || it_fail "unexpanded specifiers left in: $line"
  read -ra EXEC_CMD <<<"$line"
}

# start_with LABEL CAP...: starts sluiced as the unit would, with these capabilities. Sets
# RUN_PID and RUN_ERR; returns 0 once its workers run, 1 if it exited first (RUN_RC set).
RUN_N=0
start_with() {
  local label=$1 prefix
  shift
  RUN_N=$((RUN_N + 1))
  RUN_ERR=$IT_DIR/sluiced-$RUN_N.err
  RUN_SOCK=$IT_DIR/run/sluice-$RUN_N.sock
  it_prefix prefix
  exec_start "$prefix" "$RUN_SOCK"
  it_spawn RUN_PID "$IT_DIR/sluiced-$RUN_N.out" "$RUN_ERR" \
    ip netns exec "$NS" prlimit --memlock=$MEMLOCK:$MEMLOCK \
    setpriv --no-new-privs --inh-caps=-all --bounding-set="$(bounding "$@")" -- "${EXEC_CMD[@]}"
  local rc=0
  it_try_wait_for "$RUN_ERR" 'worker\(s\) running' 30 "$RUN_PID" || rc=$?
  case $rc in
    0) return 0 ;;
    1) cat "$RUN_ERR"; it_fail "$label: sluiced neither started nor exited in 30 s" ;;
  esac
  it_wait_exit "$RUN_PID" 10
  RUN_RC=$IT_RC
  grep -q 'Unable to parse device .net_af_xdp0' "$RUN_ERR" && it_skip "this DPDK has no net_af_xdp driver"
  return 1
}

# 1. The unit's set: runs, is readable, stops cleanly.
start_with "the unit's capabilities" "${UNIT_CAPS[@]}" || {
  cat "$RUN_ERR"
  it_fail "sluiced does not start with the unit's capabilities (${UNIT_CAPS[*]}): exit $RUN_RC"
}
eff=$(capsh --decode="$(awk '/^CapEff:/ {print $2}' "/proc/$RUN_PID/status")" | sed 's/.*=//' |
  tr ',' '\n' | tr '[:lower:]' '[:upper:]' | sort | xargs)
want=$(printf '%s\n' "${UNIT_CAPS[@]}" | sort | xargs)
echo "sluiced runs with effective capabilities: $eff"
[ "$eff" = "$want" ] || it_fail "effective capabilities '$eff', want the unit's '$want'"
setpriv --no-new-privs --inh-caps=-all --bounding-set="$(bounding "${UNIT_CAPS[@]}")" -- \
  "$SLUICECTL" --socket "$RUN_SOCK" rule list >"$IT_DIR/rules.txt" ||
  it_fail "sluicectl under the unit's bounding set cannot read the control socket"
grep -q '^capped ' "$IT_DIR/rules.txt" || it_fail "rule list lacks the running rule: $(cat "$IT_DIR/rules.txt")"

# ExecReload= as systemd would run it (same bounding set): a changed rules file is loaded into
# the running process, which keeps its PID.
sed 's/rate: 1kpps/rate: 2kpps/' "$IT_DIR/rules.yaml" >"$IT_DIR/rules-new.yaml"
reload=$(sed -n 's/^ExecReload=//p' "$UNIT")
reload=${reload//@BINDIR@\/sluicectl/$SLUICECTL}
reload=${reload//%t\/sluice\/%i.sock/$RUN_SOCK}
reload=${reload//@SYSCONFDIR@\/sluice\/%i.yaml/$IT_DIR/rules-new.yaml}
[[ $reload != *[@%\$]* ]] || it_fail "unexpanded specifiers left in ExecReload: $reload"
read -ra RELOAD_CMD <<<"$reload"
rc=0
setpriv --no-new-privs --inh-caps=-all --bounding-set="$(bounding "${UNIT_CAPS[@]}")" -- \
  "${RELOAD_CMD[@]}" >"$IT_DIR/reload.out" 2>"$IT_DIR/reload.err" || rc=$?
if [ "$rc" != 0 ]; then
  cat "$IT_DIR/reload.err"
  it_fail "ExecReload ($reload) exited $rc"
fi
kill -0 "$RUN_PID" 2>/dev/null || it_fail "sluiced is gone after ExecReload"
"$SLUICECTL" --socket "$RUN_SOCK" rule list >"$IT_DIR/rules-after.txt"
grep -q '^capped .*2kpps' "$IT_DIR/rules-after.txt" ||
  it_fail "after ExecReload the running rule is not the new one: $(cat "$IT_DIR/rules-after.txt")"
reload_note="ExecReload loads new rules into the same process"
echo "$reload_note"
it_stop "$RUN_PID" 20 TERM

# 2. Each capability is needed: without it, sluiced does not start.
for drop in "${UNIT_CAPS[@]}"; do
  rest=()
  for c in "${UNIT_CAPS[@]}"; do [ "$c" = "$drop" ] || rest+=("$c"); done
  if start_with "without $drop" "${rest[@]}"; then
    it_fail "sluiced starts without $drop: the unit grants more than it needs"
  fi
  why=$(grep -iE 'error|fail|cannot|permission|denied' "$RUN_ERR" | head -2 | tr '\n' ' ')
  echo "without $drop: exit $RUN_RC: ${why:-$(tail -1 "$RUN_ERR")}"
  [ "$RUN_RC" != 0 ] || it_fail "without $drop sluiced exited 0 without starting"
done
it_pass "sluiced runs with exactly ${UNIT_CAPS[*]} (memlock 8 MiB, no new privileges) and fails without any one; $reload_note"

#!/usr/bin/env bash
# unit_systemd [DEB]: sluiced@.service run by a real systemd, PID 1 of a throwaway container
# (tests/install/container.sh: this host's OS tree under a tmpfs overlay, private network).
# Into it goes the build's `meson install` tree, or with DEB the package (`dpkg -i`; then
# `sluicectl config check /etc/sluice/rules.yaml` and `man -w sluicectl` work there). Then:
#   - `systemctl cat sluiced@` shows the installed template (the package's: /lib/systemd/system);
#   - profile /etc/sluice/t.conf (EAL args: net_pcap replaying a UDP trace in a loop into
#     net_null, no PCI, no hugepages) and rules t.yaml with rule `capped` at 1 kpps;
#     `systemctl start sluiced@t` runs the dataplane; sluicectl over the unit's
#     RuntimeDirectory socket (/run/sluice/t.sock) sees `capped` admit ~1 kpps;
#   - t.yaml changed to 3 kpps, `systemctl reload sluiced@t`: ExecReload's `sluicectl config
#     load` applies it to the running dataplane: same MainPID, no restart, the counters kept
#     (not reset), still forwarding, `capped` listed and admitting at ~3 kpps;
#   - t.yaml made invalid, `systemctl reload` fails and changes nothing (same PID, same rules);
#   - `systemctl stop sluiced@t`: SIGTERM, exit status 0, unit inactive (not failed), socket gone.
# Negative control: a copy of the unit whose ExecReload= loads nothing (/bin/true) must fail the
# same checks, so a reload that does not reach the dataplane cannot pass here.
#
# Environment: TRACEGEN; without DEB also BUILD_ROOT, SOURCE_ROOT, MESON (meson passes them).
# Exit: 0 pass, 1 fail, 77 skip (not root, no systemd-nspawn, < 2 CPUs).
set -euo pipefail
HERE=$(dirname "$0")
# shellcheck source=tests/install/lib.sh
source "$HERE/lib.sh"
# shellcheck source=tests/install/container.sh
source "$HERE/container.sh"
DEB=${1:-}
if [ -n "$DEB" ]; then
  inst_init_standalone unit_systemd
  [ -f "$DEB" ] || inst_fail "no package $DEB"
else
  inst_init unit_systemd
fi
# shellcheck disable=SC2317  # the EXIT trap
on_exit() {
  local rc=$?
  set +e
  ct_shutdown
  inst_cleanup "$rc"
}
trap on_exit EXIT
T0=$SECONDS
log() { echo "[unit_systemd $((SECONDS - T0))s] $*" >&2; }

ct_check_host
[ "$(nproc)" -ge 2 ] || inst_skip "needs 2 CPUs (sluiced's main and worker lcores)"
[ -x "${TRACEGEN:-}" ] || inst_fail "TRACEGEN (sluice-tracegen) is not set or not executable"

W=$INST_DIR
SHARE=$W/share  # seen read-only in the container as /mnt/sluice-test
mkdir "$SHARE"
if [ -n "$DEB" ]; then
  cp "$DEB" "$SHARE/"
  BINDIR=/usr/bin SYSCONFDIR=/etc UNIT_FILE=/lib/systemd/system/sluiced@.service
  what="package $(basename "$DEB")"
else
  inst_install "$SHARE/dest"
  inst_dirs "$BUILD_ROOT"
  UNIT_FILE=$(inst_unit_dir)/sluiced@.service
  what="meson install of $BUILD_ROOT (prefix $PREFIX)"
fi
CTL=$BINDIR/sluicectl SOCK=/run/sluice/t.sock

"$TRACEGEN" --out "$SHARE/t.pcap" --packets 1000 --flows 16 --dst-port 53 >/dev/null
rules() {
  printf 'default: {action: pass}\nrules:\n'
  printf '  - {name: capped, match: {proto: udp, dst-port: 53}, key: none, rate: %s, burst: %s, action: drop}\n' "$1" "$2"
}
rules 1kpps 500 >"$SHARE/t1.yaml"
rules 3kpps 1500 >"$SHARE/t3.yaml"
rules 0pps 1500 >"$SHARE/bad.yaml"  # a zero rate: refused as a whole
cat >"$SHARE/t.conf" <<EOF
# sluiced@t: a traffic loop that needs no NIC (net_pcap replays t.pcap forever into net_null).
SLUICED_EAL_ARGS="-l 0,1 --no-pci --no-huge -m 512 --file-prefix sluice-t --vdev net_pcap0,rx_pcap=$SYSCONFDIR/sluice/t.pcap,infinite_rx=1 --vdev net_null1,no-rx=1"
SLUICED_ARGS="--stats-interval 60"
EOF

log "booting systemd in a container"
ct_boot "$W" --bind-ro="$SHARE:/mnt/sluice-test"
log "container up: PID 1 is $(ct_run ps -o comm= -p 1) ($(ct_run systemctl is-system-running))"

if [ -n "$DEB" ]; then
  ct_run dpkg -i "/mnt/sluice-test/$(basename "$DEB")" >"$W/dpkg.log" 2>&1 ||
    { cat "$W/dpkg.log"; inst_fail "dpkg -i in the container failed"; }
  # What an operator does first on the installed package.
  ct_run sluicectl config check /etc/sluice/rules.yaml || inst_fail "sluicectl config check /etc/sluice/rules.yaml failed"
  [ "$(ct_run man -w sluicectl)" = /usr/share/man/man8/sluicectl.8.gz ] || inst_fail "man -w sluicectl does not find the package's page"
else
  ct_run cp -a /mnt/sluice-test/dest/. / || inst_fail "copying the install tree into the container failed"
fi
ct_run systemctl daemon-reload
ct_run mkdir -p "$SYSCONFDIR/sluice"
ct_run cp /mnt/sluice-test/t.conf /mnt/sluice-test/t.pcap "$SYSCONFDIR/sluice/"
log "installed: $what"

# show UNIT PROPERTY: one property of the unit, as systemd has it.
show() { ct_run systemctl show -p "$2" --value "$1"; }

# read_stats NAME: `sluicectl stats --json` as $W/NAME.json, with the host's monotonic time.
read_stats() {
  ct_run "$CTL" --socket "$SOCK" stats --json >"$W/$1.json" || return 1
  /usr/bin/python3 -c 'import time; print(time.monotonic())' >"$W/$1.t"
}

# window A B: two reads 1.5 s apart; prints "admitted/s tx_growth matched_A matched_B".
window() {
  read_stats "$1" && sleep 1.5 && read_stats "$2" || return 1
  /usr/bin/python3 - "$W/$1" "$W/$2" <<'EOF'
import json, sys
def load(p):
    s = json.load(open(p + ".json"))
    rule = {r["name"]: r for r in s["rules"]}["capped"]
    tx = sum(p["tx_packets"] for p in s.get("ports", []))
    return float(open(p + ".t").read()), rule["conformed_packets"], rule["matched_packets"], tx
ta, ca, ma, xa = load(sys.argv[1])
tb, cb, mb, xb = load(sys.argv[2])
print("%.0f %d %d %d" % ((cb - ca) / (tb - ta), xb - xa, ma, mb))
EOF
}

# exercise UNIT: start, reload, stop UNIT (an instance for profile t); 0 if every check held,
# else 1 with the reason in WHY. Leaves the unit stopped.
WHY=""
exercise() {
  local unit=$1 _ pid0 pid1 out rate1 rate3 tx mb mc md
  WHY=""
  ct_run cp /mnt/sluice-test/t1.yaml "$SYSCONFDIR/sluice/t.yaml"
  ct_run systemctl start "$unit" || { WHY="systemctl start $unit failed"; return 1; }
  # Up once its workers forward (stats answers; until then "the dataplane is not set up yet").
  for _ in $(seq 300); do
    ct_run "$CTL" --socket "$SOCK" stats --json >/dev/null 2>&1 &&
      ct_run "$CTL" --socket "$SOCK" rule list >"$W/list1.txt" && break
    [ "$(show "$unit" ActiveState)" = active ] || { WHY="$unit is $(show "$unit" ActiveState) after start"; return 1; }
    sleep 0.1
  done
  grep -q '^capped .*1kpps' "$W/list1.txt" || { WHY="no rule capped at 1kpps on $SOCK: $(cat "$W/list1.txt")"; return 1; }
  pid0=$(show "$unit" MainPID)
  out=$(window a b) || { WHY="sluicectl stats failed"; return 1; }
  read -r rate1 tx _ mb <<<"$out"
  log "$unit: MainPID $pid0, capped admits $rate1/s at 1kpps, port tx +$tx in 1.5 s"
  ((tx > 0)) || { WHY="$unit forwards nothing before the reload"; return 1; }
  ((rate1 >= 500 && rate1 <= 1500)) || { WHY="capped admits $rate1/s, want ~1000 (1kpps)"; return 1; }

  ct_run cp /mnt/sluice-test/t3.yaml "$SYSCONFDIR/sluice/t.yaml"
  ct_run systemctl reload "$unit" || { WHY="systemctl reload $unit failed"; return 1; }
  pid1=$(show "$unit" MainPID)
  [ "$pid1" = "$pid0" ] || { WHY="MainPID $pid0 became $pid1 on reload: the dataplane was restarted"; return 1; }
  [ "$(show "$unit" NRestarts)" = 0 ] || { WHY="$unit restarted $(show "$unit" NRestarts) times"; return 1; }
  ct_run "$CTL" --socket "$SOCK" rule list >"$W/list3.txt" || { WHY="rule list failed after reload"; return 1; }
  grep -q '^capped .*3kpps' "$W/list3.txt" ||
    { WHY="after systemctl reload capped is not at 3kpps (ExecReload did not load t.yaml): $(cat "$W/list3.txt")"; return 1; }
  out=$(window c d) || { WHY="sluicectl stats failed after reload"; return 1; }
  read -r rate3 tx mc md <<<"$out"
  log "$unit: reloaded, MainPID $pid1, capped admits $rate3/s at 3kpps, port tx +$tx in 1.5 s"
  ((mc >= mb)) || { WHY="capped's counters were reset by the reload ($mb matched before, $mc after)"; return 1; }
  ((tx > 0 && md > mc)) || { WHY="$unit stopped forwarding after the reload"; return 1; }
  ((rate3 >= 1500 && rate3 <= 4500 && rate3 > 2 * rate1)) ||
    { WHY="capped admits $rate3/s after reload to 3kpps (was $rate1/s at 1kpps)"; return 1; }
  ct_run journalctl -u "$unit" -o cat >"$W/journal.txt" 2>&1 || true
  grep -q "^Reloaded " "$W/journal.txt" || { WHY="the journal has no 'Reloaded' line for $unit"; return 1; }

  # An invalid rules file: the reload fails, the running dataplane and its rules stay.
  ct_run cp /mnt/sluice-test/bad.yaml "$SYSCONFDIR/sluice/t.yaml"
  if ct_run systemctl reload "$unit" 2>"$W/bad-reload.err"; then
    WHY="systemctl reload $unit succeeded with an invalid t.yaml"
    return 1
  fi
  if [ "$(show "$unit" MainPID)" != "$pid0" ] || [ "$(show "$unit" ActiveState)" != active ]; then
    WHY="a failed reload stopped or restarted $unit"
    return 1
  fi
  ct_run "$CTL" --socket "$SOCK" rule list >"$W/list-bad.txt" || true
  grep -q '^capped .*3kpps' "$W/list-bad.txt" ||
    { WHY="a failed reload changed the running rules: $(cat "$W/list-bad.txt")"; return 1; }
  log "$unit: reload with an invalid t.yaml fails, MainPID $pid0 still runs its rules"

  ct_run systemctl stop "$unit" || { WHY="systemctl stop $unit failed"; return 1; }
  local state result status
  state=$(show "$unit" ActiveState) result=$(show "$unit" Result) status=$(show "$unit" ExecMainStatus)
  log "$unit: stopped: $state, result $result, exit status $status"
  if [ "$state" != inactive ] || [ "$result" != success ] || [ "$status" != 0 ]; then
    WHY="after stop $unit is $state, result $result, exit status $status (want inactive, success, 0)"
    return 1
  fi
  ! ct_run test -e "$SOCK" || { WHY="the control socket outlived $unit"; return 1; }
  return 0
}

if ! exercise sluiced@t; then
  ct_run journalctl -u sluiced@t -o short-monotonic --no-pager 2>&1 | tail -40
  inst_fail "$WHY"
fi
tail -4 "$W/journal.txt"

ct_run systemctl cat sluiced@ >"$W/cat.txt" 2>&1 || { cat "$W/cat.txt"; inst_fail "systemctl cat sluiced@ failed"; }
head -1 "$W/cat.txt"
[ "$(head -1 "$W/cat.txt")" = "# $UNIT_FILE" ] || inst_fail "systemctl cat sluiced@ shows '$(head -1 "$W/cat.txt")', want # $UNIT_FILE"
grep -q "^ExecReload=$CTL --socket %t/sluice/%i.sock config load $SYSCONFDIR/sluice/%i.yaml$" "$W/cat.txt" ||
  inst_fail "systemctl cat sluiced@ shows no ExecReload= running $CTL config load"

# Negative control: ExecReload= that loads nothing.
ct_run sh -c "sed 's|^ExecReload=.*|ExecReload=/bin/true|' $UNIT_FILE >/etc/systemd/system/sluiced-noreload@.service"
ct_run systemctl daemon-reload
if exercise sluiced-noreload@t; then
  inst_fail "a unit whose ExecReload= loads nothing passed the reload checks"
fi
ct_run systemctl stop sluiced-noreload@t || true
echo "negative control (ExecReload=/bin/true) fails as it should: $WHY"
[[ $WHY == *"not at 3kpps"* ]] || inst_fail "the negative control failed for another reason: $WHY"

inst_pass "$what: systemd (PID 1 of a container) starts sluiced@t, reload applies the new rules to the same process without a restart (it keeps forwarding and its counters), stop exits 0; systemctl cat sluiced@ shows $UNIT_FILE"

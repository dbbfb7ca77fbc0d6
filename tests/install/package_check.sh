#!/usr/bin/env bash
# package_check DEB: what installing sluice_*.deb gives, in a scratch root (a real
# `dpkg --root=DIR -i`, never into this machine's own /):
#   - the package's files and conffile (/etc/sluice/rules.yaml), and the runtime dependency
#     DPDK loads as a plugin (librte-mempool-ring23, which shlibs cannot see);
#   - the packaged `sluicectl config check /etc/sluice/rules.yaml` accepts the shipped rules
#     and refuses a broken file with exit status 2;
#   - the packaged sluiced runs (net_null, no hugepages) with the shipped rules.yaml and a
#     control socket, `sluicectl rule list` reads it, SIGTERM stops it with status 0;
#   - the packaged sluiced@.service passes `systemd-analyze verify` (its programs and manual
#     pages those of the package);
#   - `dpkg -r` keeps the conffile, `dpkg --purge` removes it.
# `systemctl cat sluiced@` and running the packaged unit need systemd as PID 1: that is
# unit_systemd.sh DEB (a container), which scripts/test.sh runs on the same package.
# Exit: 0 pass, 1 fail.
set -euo pipefail
NAME=package_check
fail() { echo "FAIL: $NAME: $*"; exit 1; }
DEB=${1:-}
[ -f "$DEB" ] || fail "usage: $0 sluice_VERSION_ARCH.deb"
W=$(mktemp -d /tmp/sluice-package-check.XXXXXX)
DP_PID="" PREFIX_ID=sluice-package-check-$$
cleanup() {
  local rc=$?
  if [ -n "$DP_PID" ]; then kill -KILL "$DP_PID" 2>/dev/null || true; wait "$DP_PID" 2>/dev/null || true; fi
  rm -rf "/var/run/dpdk/$PREFIX_ID" "$W"
  exit "$rc"
}
trap cleanup EXIT

[ "$(dpkg-deb -f "$DEB" Package)" = sluice ] || fail "$DEB is not the sluice package"
dpkg-deb -f "$DEB" Depends | grep -q 'librte-mempool-ring23' ||
  fail "Depends lacks librte-mempool-ring23 (EAL's mempool driver, a plugin)"
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | grep -qx /etc/sluice/rules.yaml ||
  fail "/etc/sluice/rules.yaml is not a conffile"

R=$W/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates"
touch "$R/var/lib/dpkg/status"
# The libraries come from this machine, not the scratch root: their dependencies are not there.
dpkg --root="$R" --force-depends --force-not-root -i "$DEB" >"$W/dpkg.log" 2>&1 ||
  { cat "$W/dpkg.log"; fail "dpkg -i into the scratch root failed"; }
dpkg --root="$R" -L sluice >"$W/files.txt"
for f in /usr/bin/sluiced /usr/bin/sluicectl /etc/sluice/rules.yaml \
    /lib/systemd/system/sluiced@.service /usr/share/man/man8/sluiced.8.gz \
    /usr/share/man/man8/sluicectl.8.gz /usr/share/man/man5/sluice-rules.5.gz \
    /usr/share/bash-completion/completions/sluicectl /usr/share/bash-completion/completions/sluiced \
    /usr/share/doc/sluice/examples/example.conf; do
  grep -qx "$f" "$W/files.txt" || fail "the package does not install $f"
  [ -e "$R$f" ] || fail "$f is listed but not on disk"
done
echo "installed into $R: $(wc -l <"$W/files.txt") paths"

CTL=$R/usr/bin/sluicectl
"$CTL" config check "$R/etc/sluice/rules.yaml" || fail "sluicectl config check /etc/sluice/rules.yaml failed"
printf 'rules:\n  - {name: x, rate: 0pps}\n' >"$W/bad.yaml"
rc=0
"$CTL" config check "$W/bad.yaml" 2>"$W/bad.err" || rc=$?
[ "$rc" = 2 ] || fail "config check of a broken file: exit status $rc, want 2"
grep -q "bad.yaml:" "$W/bad.err" || fail "config check of a broken file says no file:line: $(cat "$W/bad.err")"

if [ "$(id -u)" = 0 ]; then
  SOCK=$R/run/sluice/test.sock
  mkdir -p "$R/run/sluice"  # what the unit's RuntimeDirectory=sluice makes
  "$R/usr/bin/sluiced" -l 0,1 --no-pci --no-huge -m 512 --no-telemetry --file-prefix "$PREFIX_ID" \
    --vdev net_null0 -- --config "$R/etc/sluice/rules.yaml" --control "$SOCK" \
    >"$W/sluiced.out" 2>"$W/sluiced.err" &
  DP_PID=$!
  for _ in $(seq 200); do
    "$CTL" --socket "$SOCK" rule list >"$W/rules.txt" 2>/dev/null && break
    kill -0 "$DP_PID" 2>/dev/null || { cat "$W/sluiced.err"; fail "the packaged sluiced exited"; }
    sleep 0.1
  done
  cat "$W/rules.txt"
  for rule in dns-per-source web-mark tenant-a; do
    grep -q "^$rule " "$W/rules.txt" || fail "rule list of the packaged sluiced lacks $rule"
  done
  kill -TERM "$DP_PID"
  rc=0
  wait "$DP_PID" || rc=$?
  DP_PID=""
  [ "$rc" = 0 ] || { cat "$W/sluiced.err"; fail "sluiced exited $rc after SIGTERM, want 0"; }
  [ ! -e "$SOCK" ] || fail "the control socket outlived sluiced"
  ran="the packaged sluiced ran with the shipped rules"
else
  ran="the packaged sluiced not started (needs root for DPDK)"
fi

if command -v systemd-analyze >/dev/null; then
  mkdir "$W/units"
  sed "s|=/usr/bin/|=$R/usr/bin/|" "$R/lib/systemd/system/sluiced@.service" >"$W/units/sluiced@pkg.service"
  (cd "$W/units" && MANPATH=$R/usr/share/man systemd-analyze verify --man=yes ./sluiced@pkg.service) ||
    fail "systemd-analyze verify refuses the packaged unit"
  verified="systemd-analyze verify accepts the packaged unit"
else
  verified="systemd-analyze is not installed: unit not verified"
fi

dpkg --root="$R" --force-not-root -r sluice >"$W/dpkg.log" 2>&1 || { cat "$W/dpkg.log"; fail "dpkg -r failed"; }
[ -f "$R/etc/sluice/rules.yaml" ] || fail "dpkg -r removed the conffile /etc/sluice/rules.yaml"
[ ! -e "$R/usr/bin/sluiced" ] || fail "dpkg -r left /usr/bin/sluiced"
dpkg --root="$R" --force-not-root --purge sluice >"$W/dpkg.log" 2>&1 || { cat "$W/dpkg.log"; fail "dpkg --purge failed"; }
[ ! -e "$R/etc/sluice/rules.yaml" ] || fail "dpkg --purge left /etc/sluice/rules.yaml"

echo "PASS: $NAME: $(basename "$DEB") installs, its sluicectl checks /etc/sluice/rules.yaml, $ran; $verified; remove keeps and purge removes the conffile"

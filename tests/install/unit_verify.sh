#!/usr/bin/env bash
# unit_verify: the installed sluiced@.service passes `systemd-analyze verify` (syntax, every
# directive known, the Exec* programs present in the install tree, the Documentation= manual
# pages installed and readable by man), and a copy naming a missing program does not (so the
# check can fail here). Its CapabilityBoundingSet is the set sluiced(8) documents.
#
# It never touches the host's systemd: nothing is installed outside a scratch directory.
# unit_systemd.sh starts, reloads and stops the unit under a systemd of its own (a container).
set -euo pipefail
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
inst_init unit_verify
command -v systemd-analyze >/dev/null || inst_skip "systemd-analyze is not installed (Debian: systemd)"

D=$INST_DIR/root
inst_install "$D"
inst_dirs
UNIT=$D$(inst_unit_dir)/sluiced@.service
[ -f "$UNIT" ] || inst_fail "no $UNIT"

# An instance of the template, its programs looked up in the install tree.
mkdir "$INST_DIR/units"
sed "s|$BINDIR/|$D$BINDIR/|g" "$UNIT" >"$INST_DIR/units/sluiced@test.service"
grep -q "^ExecStart=$D$BINDIR/sluiced " "$INST_DIR/units/sluiced@test.service" ||
  inst_fail "the installed unit's ExecStart is not $BINDIR/sluiced"
export MANPATH=$D$MANDIR
if ! (cd "$INST_DIR/units" && systemd-analyze verify --man=yes ./sluiced@test.service) \
    >"$INST_DIR/verify.log" 2>&1; then
  cat "$INST_DIR/verify.log"
  inst_fail "systemd-analyze verify refuses the installed unit"
fi
cat "$INST_DIR/verify.log"

# Negative control: the same verification must notice a missing program.
sed "s|^ExecReload=$D$BINDIR/sluicectl|ExecReload=$INST_DIR/missing/sluicectl|" \
  "$INST_DIR/units/sluiced@test.service" >"$INST_DIR/units/sluiced@broken.service"
if (cd "$INST_DIR/units" && systemd-analyze verify --man=yes ./sluiced@broken.service) \
    >"$INST_DIR/broken.log" 2>&1; then
  inst_fail "systemd-analyze verify accepted a unit whose ExecReload program is missing"
fi
grep -q "missing/sluicectl" "$INST_DIR/broken.log" ||
  inst_fail "verify failed the broken unit for another reason: $(cat "$INST_DIR/broken.log")"

# The granted capabilities are the documented ones, no more, no fewer.
unit_caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT" | tr ' ' '\n' | sort -u | xargs)
man_caps=$(MANWIDTH=200 man -l "$D$MANDIR/man8/sluiced.8" 2>/dev/null | col -b |
  sed -n '/^CAPABILITIES/,/^FILES/p' | sed -n 's/^ *\(CAP_[A-Z_]*\)$/\1/p' | sort -u | xargs)
echo "unit grants: $unit_caps; sluiced(8) documents: $man_caps"
[ -n "$unit_caps" ] || inst_fail "the unit has no CapabilityBoundingSet"
[ "$unit_caps" = "$man_caps" ] || inst_fail "the unit grants '$unit_caps', sluiced(8) documents '$man_caps'"
grep -q '^Restart=on-failure$' "$UNIT" || inst_fail "no Restart=on-failure"
grep -q '^RuntimeDirectory=sluice$' "$UNIT" || inst_fail "no RuntimeDirectory=sluice"

if [ -d /run/systemd/system ]; then
  how="systemd runs this machine, but the test does not install units into the host's systemd"
else
  how="PID 1 is '$(ps -o comm= -p 1)', not systemd: unit_systemd runs the unit in a container"
fi
inst_pass "systemd-analyze verify accepts sluiced@.service ($how)"

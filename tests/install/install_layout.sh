#!/usr/bin/env bash
# install_layout: `meson install --destdir` puts exactly the service layout in place, under
# the build's --prefix and --sysconfdir:
#   - the closed list of installed files (binaries, /etc/sluice/rules.yaml, docs, examples,
#     the unit, three manual pages, bash completion): nothing missing, nothing else;
#   - the installed rules.yaml is the commented example, and the installed sluicectl accepts it;
#   - the installed unit names the installed binaries and the sysconfdir's profile;
#   - a second, configure-only build with --prefix=/opt/sluice --sysconfdir=/etc/opt/sluice
#     would install everything under those two (meson introspect --installed), its unit
#     naming /opt/sluice/bin and /etc/opt/sluice/sluice.
set -euo pipefail
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
inst_init install_layout

D=$INST_DIR/root
inst_install "$D"
inst_dirs
UNIT_DIR=$(inst_unit_dir)
COMP_DIR=$(inst_completion_dir)
DOC=$DATADIR/doc/sluice

expected=(
  "$BINDIR/sluiced" "$BINDIR/sluicectl"
  "$SYSCONFDIR/sluice/rules.yaml"
  "$DOC/README.md" "$DOC/SEMANTICS.md" "$DOC/BENCHMARKS.md"
  "$DOC/examples/rules-live.yaml"
  "$DOC/examples/example.conf" "$DOC/examples/60-sluice-hugepages.conf"
  "$UNIT_DIR/sluiced@.service"
  "$MANDIR/man8/sluiced.8" "$MANDIR/man8/sluicectl.8" "$MANDIR/man5/sluice-rules.5"
  "$COMP_DIR/sluicectl" "$COMP_DIR/sluiced"
)
printf '%s\n' "${expected[@]}" | sort >"$INST_DIR/expected.txt"
(cd "$D" && find . -type f -o -type l) | sed 's|^\.||' | sort >"$INST_DIR/installed.txt"
if ! diff -u "$INST_DIR/expected.txt" "$INST_DIR/installed.txt"; then
  inst_fail "installed files differ from the expected layout (- expected, + installed)"
fi
echo "installed (prefix $PREFIX, sysconfdir $SYSCONFDIR):"
sed 's/^/  /' "$INST_DIR/installed.txt"

for b in sluiced sluicectl; do
  [ -x "$D$BINDIR/$b" ] || inst_fail "$BINDIR/$b is not executable"
done
cmp -s "$SOURCE_ROOT/examples/rules.yaml" "$D$SYSCONFDIR/sluice/rules.yaml" ||
  inst_fail "$SYSCONFDIR/sluice/rules.yaml is not examples/rules.yaml"
"$D$BINDIR/sluicectl" config check "$D$SYSCONFDIR/sluice/rules.yaml" ||
  inst_fail "the installed sluicectl refuses the installed rules.yaml"
for page in man8/sluiced.8 man8/sluicectl.8 man5/sluice-rules.5; do
  grep -q '^\.TH ' "$D$MANDIR/$page" || inst_fail "$MANDIR/$page is not a roff manual page"
done

# check_unit UNIT BINDIR SYSCONFDIR: the unit runs BINDIR's programs on SYSCONFDIR's files.
check_unit() {
  local unit=$1 bin=$2 etc=$3 want
  for want in \
    "ExecStart=$bin/sluiced \$SLUICED_EAL_ARGS -- --config $etc/sluice/%i.yaml --control %t/sluice/%i.sock" \
    "ExecReload=$bin/sluicectl --socket %t/sluice/%i.sock config load $etc/sluice/%i.yaml" \
    "EnvironmentFile=$etc/sluice/%i.conf" \
    "RuntimeDirectory=sluice"; do
    grep -qF -- "$want" "$unit" || inst_fail "$unit has no line with: $want"
  done
  ! grep -q '@[A-Z]*@' "$unit" || inst_fail "$unit has unsubstituted @VARIABLES@"
}
check_unit "$D$UNIT_DIR/sluiced@.service" "$BINDIR" "$SYSCONFDIR"

# Another prefix, configured only (no compile): where meson would install each file.
ALT=$INST_DIR/alt-build
"$MESON" setup "$ALT" "$SOURCE_ROOT" --prefix=/opt/sluice --sysconfdir=/etc/opt/sluice \
  -Dtests=disabled >"$INST_DIR/alt-setup.log" 2>&1 || {
  cat "$INST_DIR/alt-setup.log"
  inst_fail "meson setup --prefix=/opt/sluice failed"
}
"$MESON" introspect --installed "$ALT" | /usr/bin/python3 -c '
import json, sys
dests = sorted(json.load(sys.stdin).values())
print("with --prefix=/opt/sluice --sysconfdir=/etc/opt/sluice:")
for d in dests: print("  " + d)
outside = [d for d in dests if not d.startswith(("/opt/sluice/", "/etc/opt/sluice/"))]
if outside: sys.exit("outside the prefix and sysconfdir: %s" % outside)
for want in ("/opt/sluice/bin/sluiced", "/opt/sluice/bin/sluicectl",
             "/etc/opt/sluice/sluice/rules.yaml", "/opt/sluice/lib/systemd/system/sluiced@.service",
             "/opt/sluice/share/man/man8/sluicectl.8",
             "/opt/sluice/share/bash-completion/completions/sluicectl",
             "/opt/sluice/share/bash-completion/completions/sluiced"):
    if want not in dests: sys.exit("not installed: " + want)
' || inst_fail "--prefix/--sysconfdir not honoured"
check_unit "$ALT/systemd/sluiced@.service" /opt/sluice/bin /etc/opt/sluice

inst_pass "${#expected[@]} files where the prefix and sysconfdir say, and nowhere else"

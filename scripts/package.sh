#!/usr/bin/env bash
# Builds the Debian package sluice_VERSION_ARCH.deb with `dpkg-buildpackage -us -uc -b` in a
# copy of the tree under /tmp (the tree itself stays clean), checks it with lintian (no errors
# or warnings; none needs an override today: add one to debian/sluice.lintian-overrides only
# with a comment saying why), and copies it to OUT_DIR
# (default: build-deb/ in the tree). Prints the .deb's path as its last line.
#   scripts/package.sh [OUT_DIR]
# Takes a few minutes on two cores: it compiles sluiced and sluicectl once more.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=${1:-$src/build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)

for tool in dpkg-buildpackage dh lintian scdoc; do
  command -v "$tool" >/dev/null ||
    { echo "package.sh: $tool is missing (scripts/setup-deps.sh installs it)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/sluice-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The files git knows (tracked, and new ones not ignored): no build directories.
mkdir "$work/sluice"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/sluice"

echo "package.sh: dpkg-buildpackage in $work/sluice" >&2
(cd "$work/sluice" &&
  DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
    dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || {
  tail -60 "$work/build.log" >&2
  echo "package.sh: dpkg-buildpackage failed (last lines above)" >&2
  exit 1
}
debs=("$work"/sluice_*.deb)
[ -f "${debs[0]}" ] || { echo "package.sh: no sluice_*.deb was built" >&2; exit 1; }

echo "package.sh: lintian" >&2
if ! lintian --fail-on error,warning --info "${debs[0]}" >"$work/lintian.log" 2>&1; then
  cat "$work/lintian.log" >&2
  echo "package.sh: lintian reports errors or warnings" >&2
  exit 1
fi
cat "$work/lintian.log" >&2
cp "${debs[0]}" "$out/"
echo "$out/$(basename "${debs[0]}")"

#!/bin/sh
# The error model (dataplane/core/result.hpp): nothing in the core or the live dataplane
# throws; failures are returned as Result. Fails, naming the line, if a `throw` reappears in
# dataplane/core or dataplane/live outside a comment. (Catching stays allowed at a boundary
# with code that throws: the rules loader's entry catches the standard library's bad_alloc.)
# Usage: no_throw_in_core.sh SOURCE_ROOT
root=${1:?usage: no_throw_in_core.sh SOURCE_ROOT}
found=$(grep -nE '^[^/"]*\bthrow\b' \
  "$root"/dataplane/core/*.cpp "$root"/dataplane/core/*.hpp "$root"/dataplane/core/*.h \
  "$root"/dataplane/live/*.cpp "$root"/dataplane/live/*.hpp)
if [ -n "$found" ]; then
  echo "throw in the core or live dataplane (return a Result instead, see result.hpp):"
  echo "$found"
  exit 1
fi
echo "no throw in dataplane/core and dataplane/live"

#!/usr/bin/python3
"""Prints the ninja targets (one a line, relative to BUILD_DIR) that the selected tests of a
configured meson build need: exactly what `meson test` itself would build for them, so that a
tree that runs only some suites (scripts/test.sh's sanitizer trees) builds only those, and
`meson test --no-rebuild` then finds every test program built.

    test_targets.py BUILD_DIR [--suite SUITE]... [TEST_NAME]...

A suite is named as `meson test --suite` takes it (unit, or sluice:unit). Exit status 2 if the
selection matches no test or names a test that does not exist (a typo would build nothing).
"""
import json
import os
import subprocess
import sys


def introspect(build_dir, what):
    out = subprocess.run(["meson", "introspect", "--" + what, build_dir], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build_dir, args = argv[1], argv[2:]
    suites, names = set(), set()
    while args:
        if args[0] == "--suite" and len(args) >= 2:
            suites.add(args[1])
            args = args[2:]
        else:
            names.add(args[0])
            args = args[1:]
    tests = introspect(build_dir, "tests")
    known = {t["name"] for t in tests}
    unknown = sorted(names - known)
    if unknown:
        print("test_targets: no such test: " + " ".join(unknown), file=sys.stderr)
        return 2

    def selected(test):
        short = {s.split(":", 1)[-1] for s in test["suite"]}
        return test["name"] in names or bool(suites & (set(test["suite"]) | short))

    chosen = [t for t in tests if selected(t)]
    if not chosen:
        print("test_targets: the selection matches no test", file=sys.stderr)
        return 2
    files = {t["id"]: t["filename"] for t in introspect(build_dir, "targets")}
    root = os.path.abspath(build_dir)
    outputs = sorted({os.path.relpath(f, root) for t in chosen for d in t["depends"]
                      for f in files[d]})
    print("\n".join(outputs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

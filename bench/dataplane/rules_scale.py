#!/usr/bin/python3
"""Benchmark helper (scripts/bench_dataplane.sh --rules-scale): a rules file of N keyed rules.

  rules_scale.py SHAPE N OUT.yaml        SHAPE: prefix | port-range | mix

The shapes of bench/core_classifier.cpp, as a rules file for live sluiced: the only rule that
matches the trace (UDP from 192.0.2.0/22 to port 53, sluice-tracegen --src-base 192.0.2.0) is
the last one; every rule has key: src-ip and no max-flows (each gets the default flow
capacity), and 1 Mpps with a burst of 1000 per source, so every packet conforms.
  prefix:     rule i is src 10.(i >> 8).(i & 255).0/24; the last src 192.0.0.0/12
  port-range: rule i is dst-port 1000+5i .. 1003+5i; the last dst-port 53
  mix:        by i % 3 a prefix rule, a port-range rule, or proto tcp with dscp i % 64; the
              last proto udp, src 192.0.0.0/12, dst-port 53
"""
import sys

LIMIT = "key: src-ip, rate: 1Mpps, burst: 1000, algorithm: token-bucket, action: drop"


def match(shape, i):
    kind = {"prefix": 0, "port-range": 1}.get(shape, i % 3)
    if kind == 0:
        return f"src: 10.{(i >> 8) & 255}.{i & 255}.0/24"
    if kind == 1:
        return f"dst-port: {1000 + 5 * i}-{1003 + 5 * i}"
    return f"proto: tcp, dscp: {i % 64}"


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("prefix", "port-range", "mix"):
        sys.exit(__doc__)
    shape, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if not 1 <= n <= 12000:  # port ranges 1000+5i stay below 65536 up to i = 12,906
        sys.exit("rules_scale.py: N must be 1..12000")
    last = {"prefix": "src: 192.0.0.0/12", "port-range": "dst-port: 53",
            "mix": "proto: udp, src: 192.0.0.0/12, dst-port: 53"}[shape]
    with open(out, "w") as f:
        f.write("default: {action: pass}\nrules:\n")
        for i in range(n - 1):
            f.write(f"  - {{name: r{i}, match: {{{match(shape, i)}}}, {LIMIT}}}\n")
        f.write(f"  - {{name: last, match: {{{last}}}, {LIMIT}}}\n")


if __name__ == "__main__":
    main()

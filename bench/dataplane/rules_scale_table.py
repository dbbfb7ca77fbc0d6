#!/usr/bin/python3
"""Benchmark helper (scripts/bench_dataplane.sh --rules-scale): results.csv -> markdown.

  rules_scale_table.py RESULTS.csv "1 100 1000 10000"

One row per shape and rule count: median (min-max) Mpps of the repetitions, ns/packet, the
ratio of ns/packet to the smallest count's of the same shape, the same two for CPU time per
packet (the CPU the process got / packets sent: on a shared machine its busy-polling lcore
gets less than a whole CPU, and wall-clock Mpps then measure the machine's load), VmRSS when
packets first flowed and at the end, the share of conforming packets and sluiced's "flow
tables:" start-up line.
"""
import csv
import statistics
import sys


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    counts = [int(n) for n in sys.argv[2].split()]

    def vals(shape, n, field="mpps"):
        return [float(r[field]) for r in rows
                if r["kind"] == f"scale:scale-{shape}-{n}" and r[field] != ""]

    def med(v):
        return statistics.median(v) if v else float("nan")

    def cpu_ns(shape, n):  # per repetition: CPU ns per packet sent
        return [1000 * float(r["cpu"]) / float(r["mpps"]) for r in rows
                if r["kind"] == f"scale:scale-{shape}-{n}" and r["mpps"] and float(r["mpps"]) > 0]

    print("Live sluiced, 1 worker, N keyed rules (key: src-ip, no max-flows, default flow "
          "capacity), the only matching rule last; net_pcap infinite_rx of 1,000 flows "
          "(132,000 64-byte packets) -> net_null; median (min-max):\n")
    show_tables = any(r["tables"] for r in rows)  # live sluiced may not print the line
    print(f"| rules | shape | Mpps | ns/packet | ns/packet vs {counts[0]:,} rule(s) | CPU "
          f"ns/packet | CPU ns/packet vs {counts[0]:,} rule(s) | CPU | RSS when "
          "packets first flow | RSS at the end | conforming |"
          + (" flow tables (sluiced at start) |" if show_tables else ""))
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
          + (" --- |" if show_tables else ""))
    for shape in ("prefix", "port-range", "mix"):
        base = med(vals(shape, counts[0]))
        base_cpu = med(cpu_ns(shape, counts[0]))
        for n in counts:
            v = vals(shape, n)
            if not v:
                continue
            m = med(v)
            tables = next((r["tables"] for r in rows
                           if r["kind"] == f"scale:scale-{shape}-{n}" and r["tables"]), "")
            print(f"| {n:,} | {shape} | {m:.2f} ({min(v):.2f}-{max(v):.2f}) | {1000 / m:.1f} | "
                  f"{base / m:.2f}x | {med(cpu_ns(shape, n)):.1f} | "
                  f"{med(cpu_ns(shape, n)) / base_cpu:.2f}x | {med(vals(shape, n, 'cpu')):.2f} | "
                  f"{med(vals(shape, n, 'rss_start_kib')) / 1024:.0f} MiB | "
                  f"{med(vals(shape, n, 'rss_kib')) / 1024:.0f} MiB | "
                  f"{med(vals(shape, n, 'conform_pct')):.2f}% |"
                  + (f" {tables.removeprefix('flow tables: ')} |" if show_tables else ""))


if __name__ == "__main__":
    main()

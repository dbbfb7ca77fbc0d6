"""Samples a process's VmRSS every --period seconds until it exits (or --until-file appears),
for scripts/flood.sh. With --sluicectl and --socket (live mode) each sample also reads
`stats --json` and records the flood rule's active_flows and flows_evicted, so the check knows
when the flow table filled. Writes "T RSS_KB ACTIVE EVICTED" lines (-1 when not read).
"""
import argparse
import json
import os
import subprocess
import time


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--period", type=float, default=0.1)
    ap.add_argument("--until-file")
    ap.add_argument("--sluicectl")
    ap.add_argument("--socket")
    ap.add_argument("--rule", default="per-src")
    a = ap.parse_args()
    t0 = time.monotonic()
    with open(a.out, "w") as out:
        k = 0
        while True:
            if a.until_file and os.path.exists(a.until_file):
                break
            rss = rss_kb(a.pid)
            if rss is None:
                break
            active = evicted = -1
            if a.sluicectl:
                p = subprocess.run([a.sluicectl, "--socket", a.socket, "stats", "--json"],
                                   capture_output=True, text=True, timeout=30)
                if p.returncode == 0:
                    for r in json.loads(p.stdout)["rules"]:
                        if r["name"] == a.rule:
                            active, evicted = r["active_flows"], r["flows_evicted"]
            out.write("%.3f %d %d %d\n" % (time.monotonic() - t0, rss, active, evicted))
            out.flush()
            k += 1
            due = t0 + k * a.period
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)


if __name__ == "__main__":
    main()

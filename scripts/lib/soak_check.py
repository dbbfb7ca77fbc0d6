"""The verdict of scripts/soak.sh, from what its run left in --dir (see soak.sh for the checks
and soak_driver.py for the files). Prints the figures; exit 1 with every violation named."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak_driver import flatten_stats  # noqa: E402

RSS_TOLERANCE = 0.01
# Connections the driver itself may hold open at a sample's instant beyond its control
# connection (always open, so part of the baseline): one scrape and one `stats` read, which
# the servers close a moment after the client does.
FDS_IN_FLIGHT = 2
# Reads are quick: at least 90% of their slots. Changes wait for both workers to pass a
# quiescent state, which on a machine with more runnable tasks than CPUs takes a scheduler
# slice (p50 ~20 ms at load average 15 on 2 CPUs, vs ~0.1 ms idle): at least a quarter of the
# planned 100 per second, the achieved rate printed. Fewer means a write path that stalls.
SCHEDULE_KEPT = 0.90
CHANGES_KEPT = 0.25


def explain_fds(d, warmup):
    """Name the fds open at the end that were not open at the warm-up's end."""
    try:
        snaps = [json.loads(l) for l in open(os.path.join(d, "fds.jsonl")) if l.strip()]
    except OSError:
        return
    at_base = [s for s in snaps if s["t"] <= warmup]
    base = at_base[-1]["fds"] if at_base else (snaps[0]["fds"] if snaps else {})
    end = snaps[-1]["fds"] if snaps else {}
    print("  fds at the warm-up's end: %s" % sorted(base.values()))
    for fd in sorted(end, key=int):
        if base.get(fd) != end[fd]:
            print("  fd %s at the end: %s (at the warm-up's end: %s)" % (fd, end[fd], base.get(fd)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--warmup", type=float, required=True)
    ap.add_argument("--load", nargs=2, required=True)
    a = ap.parse_args()
    d = a.dir
    fails = []

    drv = json.load(open(os.path.join(d, "driver.json")))
    rep = json.load(open(os.path.join(d, "report.json")))
    sent = json.loads(open(os.path.join(d, "sender.json")).read().strip().splitlines()[-1])
    veth_dropped = int(open(os.path.join(d, "veth_dropped")).read())
    samples = [tuple(float(x) for x in l.split()) for l in open(os.path.join(d, "samples.txt")) if l.strip()]

    # Resources: ignore the warm-up; the baseline is the first sample at or after its end.
    after = [s for s in samples if s[0] >= a.warmup]
    if len(after) < 2:
        fails.append("only %d resource sample(s) after the %.0f s warm-up" % (len(after), a.warmup))
    else:
        t0, fds0, rss0 = after[0]
        tn, fdsn, rssn = after[-1]
        rss_lo, rss_hi = min(s[2] for s in after), max(s[2] for s in after)
        fds_lo, fds_hi = min(s[1] for s in after), max(s[1] for s in after)
        print("resources (%d samples, 1/s; warm-up %.0f s ignored): fds %d at %.0f s -> %d at "
              "%.0f s (range %d-%d); VmRSS %.1f MiB -> %.1f MiB (range %.1f-%.1f MiB, %+.2f%%)"
              % (len(after), a.warmup, fds0, t0, fdsn, tn, fds_lo, fds_hi, rss0 / 1024,
                 rssn / 1024, rss_lo / 1024, rss_hi / 1024, 100 * (rssn - rss0) / rss0))
        print("  warm-up: fds %d -> %d, VmRSS %.1f -> %.1f MiB"
              % (samples[0][1], fds0, samples[0][2] / 1024, rss0 / 1024))
        for t, fds, rss in after:
            if abs(rss - rss0) > RSS_TOLERANCE * rss0:
                fails.append("VmRSS %.1f MiB at %.0f s, more than 1%% from %.1f MiB at %.0f s"
                             % (rss / 1024, t, rss0 / 1024, t0))
                break
        # The baseline's own in-flight connections: the smallest count near it. Fewer fds
        # later is no leak (a connection open at the baseline closed since); more is.
        base = min(s[1] for s in after[:5])
        fails_before_fds = len(fails)
        for t, fds, rss in after:
            if fds > base + FDS_IN_FLIGHT:
                fails.append("%d open fds at %.0f s; baseline %d (+%d in flight at most)"
                             % (fds, t, base, FDS_IN_FLIGHT))
                break
        tail_min = min(s[1] for s in after[-5:])
        if tail_min > base:
            fails.append("open fds at the end %d, %d at the warm-up's end" % (tail_min, base))
        if len(fails) > fails_before_fds:
            explain_fds(d, a.warmup)

    # mbufs.
    dp = rep["dataplane"]
    print("mbufs: pool %d, most in use during the run %d; after close: in use %d, kept by "
          "drivers %d, leaked %d" % (dp["mbufs_total"], drv["mbufs_in_use_max"], dp["mbufs_in_use"],
                                     dp["mbufs_kept_by_drivers"], dp["mbufs_leaked"]))
    if dp["mbufs_leaked"] != 0:
        fails.append("%d mbufs leaked" % dp["mbufs_leaked"])
    if dp["mbufs_in_use"] != dp["mbufs_kept_by_drivers"]:
        fails.append("%d mbufs out of the pool after close, %d kept by drivers"
                     % (dp["mbufs_in_use"], dp["mbufs_kept_by_drivers"]))

    # Packets.
    rules = rep["rules"] + [rep["default"]]
    rule_drops = sum(r["dropped_packets"] for r in rules)
    drops = rule_drops + dp["dropped_tx_buffer_full"] + dp["dropped_shaper_full"] + dp["dropped_at_shutdown"]
    port = rep["ports"][0]
    print("packets: sent %d; port rx %d + missed %d + veth drops %d; dataplane rx %d = tx %d "
          "+ rule drops %d + tx-buffer-full %d + shaper-full %d + at-shutdown %d"
          % (sent["packets"], port["rx_packets"], port["missed_packets"], veth_dropped,
             dp["rx_packets"], dp["tx_packets"], rule_drops, dp["dropped_tx_buffer_full"],
             dp["dropped_shaper_full"], dp["dropped_at_shutdown"]))
    if dp["rx_packets"] != dp["tx_packets"] + drops:
        fails.append("rx %d != tx %d + drops %d (unaccounted: %d)"
                     % (dp["rx_packets"], dp["tx_packets"], drops,
                        dp["rx_packets"] - dp["tx_packets"] - drops))
    if port["rx_packets"] != dp["rx_packets"]:
        fails.append("port rx %d != dataplane rx %d" % (port["rx_packets"], dp["rx_packets"]))
    if sent["packets"] != port["rx_packets"] + port["missed_packets"] + veth_dropped:
        fails.append("sent %d != rx %d + missed %d + veth dropped %d: %d lost where nothing "
                     "counts them (net_af_packet's socket rings?)"
                     % (sent["packets"], port["rx_packets"], port["missed_packets"], veth_dropped,
                        sent["packets"] - port["rx_packets"] - port["missed_packets"] - veth_dropped))
    if rule_drops == 0 or dp["tx_packets"] == 0:
        fails.append("the rule never dropped or nothing went out: the changes did not bite")
    for r in rules:
        if r["matched_packets"] != r["passed_packets"] + r["dropped_packets"]:
            fails.append("REPORT.json: %s matched %d != passed + dropped %d"
                         % (r["name"], r["matched_packets"], r["passed_packets"] + r["dropped_packets"]))

    # Changes and reads, monotone counters.
    print("changes: %d rule.set + %d config.load, %d applied of %d planned (every 10 ms: %.1f/s); "
          "apply round trip p50 %.2f ms, p99 %.2f ms, max %.1f ms"
          % (drv["sets"], drv["loads"], drv["applied"], drv["planned_changes"],
             drv["applied"] / max(1, drv["planned_changes"]) * 100,
             drv.get("change_ms_p50", 0), drv.get("change_ms_p99", 0), drv.get("change_ms_max", 0)))
    print("reads: %d scrapes and %d `stats --json` of %d planned (every 100 ms); slowest scrape "
          "%.1f ms, slowest `sluicectl stats --json` %.1f ms (process start included)"
          % (drv["scrapes"], drv["reads"], drv["planned_reads"], drv["scrape_ms_max"],
             drv["stats_ms_max"]))
    if drv["applied"] != drv["sets"] + drv["loads"]:
        fails.append("%d changes sent, %d applied" % (drv["sets"] + drv["loads"], drv["applied"]))
    if drv["applied"] < CHANGES_KEPT * drv["planned_changes"]:
        fails.append("only %d of %d planned changes" % (drv["applied"], drv["planned_changes"]))
    for what in ("scrapes", "reads"):
        if drv[what] < SCHEDULE_KEPT * drv["planned_reads"]:
            fails.append("only %d of %d planned %s" % (drv[what], drv["planned_reads"], what))
    last = flatten_stats(json.load(open(os.path.join(d, "last_stats.json"))))
    final = flatten_stats(rep)
    for k, v in last.items():
        if k in final and final[k] < v:
            fails.append("REPORT.json %s %d below the last live read %d" % (k, final[k], v))
    if drv["violation_count"]:
        fails.append("%d violation(s) during the run, e.g.: %s"
                     % (drv["violation_count"], "; ".join(drv["violations"][:5])))
    print("load average (1/5/15 min) at the start %s, at the end %s (a machine shared with other "
          "work)" % (a.load[0], a.load[1]))
    if fails:
        for f in fails:
            print("FAIL: soak: " + f)
        sys.exit(1)


if __name__ == "__main__":
    main()

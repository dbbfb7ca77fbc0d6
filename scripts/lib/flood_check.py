"""The verdict of scripts/flood.sh (see there for the traffic and the rule). Prints the figures;
exit 1 naming every violation.

The accounting this relies on (dataplane/core/flow_table.cpp, pipeline.cpp): every packet of
the keyed rule either finds its flow, or claims a slot (created: an empty slot, within
capacity; evicted: the LRU flow of its two candidate sets, idle >= min-evict-idle, counted in
flows_evicted), or gets no slot (the rule's `overflow` action: `pass` here, counted as
exceeded and passed, never conformed). The rule's burst (64 bytes) admits one 64-byte
established-flow packet per bucket and never a 128-byte flood packet, and its rate (1/80
byte/s) refills less than a packet over the run (64 bytes: 5120 s). Hence, exactly:
  - conformed_packets = established-flow insertions (one conforming packet per bucket made);
  - passed - conformed = packets that got no slot; in the passed capture, flood sources among
    them are flood packets refused a slot;
  - flood insertions = flood packets seen - flood packets passed (each flood flow sends once);
  - flows_evicted = flood insertions + conformed - active_flows (no idle expiry: the trace is
    shorter than the idle timeout);
  - an established flow survived (kept its bucket and its slot all along) iff it passed exactly
    one packet: a bucket made again passes one more, a packet refused a slot passes too.
"""
import argparse
import ipaddress
import json
import struct
import sys


def passed_sources(path):
    """Source IPv4 address -> packets in a pcap (Ethernet, no VLAN; pcap or pcap-ns)."""
    counts = {}
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise SystemExit("%s: not a pcap file" % path)
        magic = struct.unpack("<I", head[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            endian = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            endian = ">"
        else:
            raise SystemExit("%s: not a pcap file (magic %08x)" % (path, magic))
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            _, _, incl, _ = struct.unpack(endian + "IIII", rec)
            data = f.read(incl)
            if len(data) >= 34 and data[12:14] == b"\x08\x00":
                src = struct.unpack(">I", data[26:30])[0]
                counts[src] = counts.get(src, 0) + 1
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--passed-pcap", required=True)
    ap.add_argument("--rule", default="per-src")
    ap.add_argument("--flood-packets", type=int, required=True,
                    help="flood packets that reached the rule (at least; see --unseen-lost)")
    ap.add_argument("--flood-sent", type=int, required=True, help="flood flows sent (their source range)")
    ap.add_argument("--unseen-lost", type=int, default=0,
                    help="packets lost before the rule where no counter saw them (live): the "
                         "flood packets that reached the rule are between --flood-packets and "
                         "that plus this")
    ap.add_argument("--flood-base", required=True)
    ap.add_argument("--heavy", type=int, required=True)
    ap.add_argument("--heavy-base", required=True)
    ap.add_argument("--capacity", type=int, required=True)
    ap.add_argument("--table-bytes", type=int, required=True)
    ap.add_argument("--rss-base-kb", type=int, required=True)
    ap.add_argument("--rss-constant-kb", type=int, required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--min-survivors", type=float, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    a = ap.parse_args()
    fails = []

    rep = json.load(open(a.report))
    r = {x["name"]: x for x in rep["rules"]}[a.rule]
    active, evicted = r["active_flows"], r["flows_evicted"]
    conformed, passed = r["conformed_packets"], r["passed_packets"]

    counts = passed_sources(a.passed_pcap)
    flood0 = int(ipaddress.IPv4Address(a.flood_base))
    heavy0 = int(ipaddress.IPv4Address(a.heavy_base))
    flood_passed = sum(n for s, n in counts.items() if flood0 <= s < flood0 + a.flood_sent)
    heavy_counts = [counts.get(heavy0 + i, 0) for i in range(a.heavy)]
    heavy_passed = sum(heavy_counts)
    survivors = sum(1 for n in heavy_counts if n == 1)
    other = sum(counts.values()) - flood_passed - heavy_passed

    inserted = a.flood_packets - flood_passed + conformed
    print("%s: %d flood flows (one packet each) and %d established flows (10 pps each) through "
          "rule %s, capacity %d flows (%.1f MiB table), %.1f s"
          % (a.mode, a.flood_packets, a.heavy, a.rule, a.capacity, a.table_bytes / 2**20, a.seconds))
    print("flows: inserted %d (flood %d + established %d), resident %d, evicted %d; no slot: "
          "%d packets (%d of them flood)"
          % (inserted, a.flood_packets - flood_passed, conformed, active, evicted,
             passed - conformed, flood_passed))
    if active > a.capacity:
        fails.append("%d flows resident, capacity %d" % (active, a.capacity))
    lost = a.unseen_lost
    if lost == 0 and evicted != inserted - active:
        fails.append("flows_evicted %d != inserted %d - resident %d = %d (off by %d)"
                     % (evicted, inserted, active, inserted - active, evicted - (inserted - active)))
    elif lost > 0:
        # Which packets were lost is unknown: flood or established, so the flood insertions
        # are known to within the loss.
        print("  %d packets lost unseen before the rule: flood insertions known to within %d; "
              "flows_evicted must lie in [%d, %d]"
              % (lost, lost, inserted - active, inserted + lost - active))
        if not inserted - active <= evicted <= inserted + lost - active:
            fails.append("flows_evicted %d outside [inserted - resident, + lost] = [%d, %d]"
                         % (evicted, inserted - active, inserted + lost - active))
    if other != 0:
        fails.append("%d passed packets from neither the flood nor the established flows" % other)
    if heavy_passed + flood_passed != passed:
        fails.append("the passed capture holds %d packets, the rule passed %d"
                     % (heavy_passed + flood_passed, passed))
    print("established flows: %d of %d survived (kept their bucket and slot throughout: exactly "
          "one packet passed); %d lost it at least once; most passes by one flow %d"
          % (survivors, a.heavy, a.heavy - survivors, max(heavy_counts) if heavy_counts else 0))
    if survivors < a.min_survivors * a.heavy:
        fails.append("only %d of %d established flows survived (want >= %.0f%%)"
                     % (survivors, a.heavy, 100 * a.min_survivors))

    # Memory. Samples: "T RSS_KB ACTIVE EVICTED".
    samples = [tuple(float(x) for x in l.split()) for l in open(a.samples) if l.strip()]
    if len(samples) < 4:
        fails.append("only %d RSS samples" % len(samples))
    else:
        peak = max(s[1] for s in samples)
        bound = a.rss_base_kb + a.table_bytes / 1024 + a.rss_constant_kb
        print("RSS: before %.1f MiB, peak %.1f MiB; bound = before + table %.1f MiB + constant "
              "%.1f MiB = %.1f MiB"
              % (a.rss_base_kb / 1024, peak / 1024, a.table_bytes / 2**20,
                 a.rss_constant_kb / 1024, bound / 1024))
        if peak > bound:
            fails.append("peak RSS %.1f MiB above the bound %.1f MiB" % (peak / 1024, bound / 1024))
        # After the table is full: live knows when (active_flows read with each sample);
        # replay reads no counters while it runs, but the flood's flows arrive evenly and the
        # capacity is at most half of them, so the table is full by the run's middle.
        full = [s for s in samples if s[2] >= a.capacity]
        if a.mode == "live":
            after = full
            what = "from the first sample with the table full (%d flows)" % a.capacity
        else:
            after = samples[len(samples) // 2:]
            what = "over the run's second half"
        if len(after) < 2:
            fails.append("fewer than 2 RSS samples after the table filled")
        else:
            ref, top = after[0][1], max(s[1] for s in after)
            print("RSS after the table filled (%s, %d samples): %.1f MiB -> at most %.1f MiB "
                  "(%+.2f%%), at the end %.1f MiB"
                  % (what, len(after), ref / 1024, top / 1024, 100 * (top - ref) / ref,
                     after[-1][1] / 1024))
            if top > ref * 1.01:
                fails.append("RSS grew %.1f%% after the table was full: an allocation per flow?"
                             % (100 * (top - ref) / ref))
    if fails:
        for f in fails:
            print("FAIL: flood: " + f)
        sys.exit(1)


if __name__ == "__main__":
    main()

"""The load of scripts/soak.sh, run inside sluiced's network namespace (for --metrics on its
loopback): rule changes every 10 ms over one control connection (protocol v2,
docs/CONTROL.md), a /metrics scrape and a `sluicectl stats --json` every 100 ms, and a sample
of sluiced's open fds and VmRSS every second, each on an absolute schedule of its own, for
--seconds. Checks as it goes that every change is applied (generation + 1) and that no counter
goes down between two reads; writes into --dir:
  samples.txt   "T FDS RSS_KB" per second (T: seconds since the driver started)
  fds.jsonl     {"t": T, "fds": {fd: target}} at each sample whose fds differ from the last
  last_stats.json  the last `stats --json`
  driver.json   counts, latencies, the largest mbufs_in_use seen, and every violation.
Exit 0 when it ran to the end (violations are for soak_check.py to judge), 1 when it could not.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

CHANGE_PERIOD_S = 0.010
READ_PERIOD_S = 0.100
SAMPLE_PERIOD_S = 1.0
# A cycle of per-source rates around the ~78 pps each of 256 sources offers at 20 kpps: some
# changes make the rule drop, some not.
RATES_PPS = [40, 50, 60, 70, 80]
GAUGES = {"active_flows", "mbufs_total", "mbufs_in_use"}
MAX_VIOLATIONS = 50
# A change waits for a grace period of both workers; on a shared, oversubscribed machine a
# worker may be off its CPU for a second or more (seen: 1.5 s at load average 17 on 2 CPUs).
# Longer than this is a hang.
CHANGE_TIMEOUT_S = 30

RULES_TEMPLATE = """default: {action: pass}
rules:
  - {name: flood, match: {proto: udp, dst-port: 9}, key: src-ip, rate: %dpps, burst: 20,
     action: drop}
  - {name: web, match: {proto: tcp, dst-port: 80}, key: src-ip, rate: 100pps, burst: 20,
     action: drop}
"""


class Violations:
    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.count = 0

    def add(self, text):
        with self.lock:
            self.count += 1
            if len(self.items) < MAX_VIOLATIONS:
                self.items.append(text)


class Control:
    """One connection to the control socket; requests one after the other."""

    def __init__(self, path, timeout_s):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1

    def call(self, op, **fields):
        req = {"version": 2, "id": self.next_id, "op": op}
        req.update(fields)
        self.next_id += 1
        body = json.dumps(req).encode()
        self.sock.sendall(b"%d\n" % len(body) + body)
        while b"\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\n", 1)
        n = int(head)
        while len(self.buf) < n:
            self._more()
        body, self.buf = self.buf[:n], self.buf[n:]
        reply = json.loads(body)
        if reply.get("id") != req["id"]:
            raise RuntimeError("reply id %r to request %d" % (reply.get("id"), req["id"]))
        return reply

    def _more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise RuntimeError("the control socket closed the connection")
        self.buf += chunk


def flatten_stats(j):
    """Counter name -> value of a `stats --json` document (or REPORT.json), gauges left out."""
    out = {}
    for r in j.get("rules", []) + [j.get("default", {})]:
        for k, v in r.items():
            if isinstance(v, int) and k not in GAUGES:
                out["rule %s %s" % (r.get("name"), k)] = v
    for p in j.get("ports", []):
        for k, v in p.items():
            if isinstance(v, int) and k != "port":
                out["port %s %s" % (p["port"], k)] = v
    for k, v in j.get("dataplane", {}).items():
        if isinstance(v, int) and k not in GAUGES:
            out["dataplane %s" % k] = v
    return out


def parse_metrics(text):
    """Series -> value of the counters in a Prometheus text body."""
    counters, series = set(), {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4 and parts[3] == "counter":
                counters.add(parts[2])
            continue
        if not line or line[0] == "#":
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        base = name[:-len("_total")] if name.endswith("_total") else name
        if name in counters or base in counters:
            series[name_labels] = float(value)
    return series


def compare(kind, prev, cur, where, violations):
    for k, v in cur.items():
        if k in prev and v < prev[k]:
            violations.add("%s %s: %s went down from %s to %s" % (kind, where, k, prev[k], v))


def slots(t0, period_s, deadline):
    """Yields k = 0, 1, ... at t0 + k * period_s until the deadline. A slot that overruns is
    followed at once by the next (catch-up, no skipping)."""
    k = 0
    while True:
        due = t0 + k * period_s
        now = time.monotonic()
        if due >= deadline or now >= deadline:
            return
        if due > now:
            time.sleep(due - now)
        yield k
        k += 1


def run_changes(args, deadline, state, violations):
    ctl = Control(args.socket, CHANGE_TIMEOUT_S)
    gen = ctl.call("rules")["result"]["generation"]
    t0 = time.monotonic()
    lat = []
    # A change is due every 10 ms; the count falls short of the plan only by what the changes'
    # round trips could not fit.
    for k in slots(t0, CHANGE_PERIOD_S, deadline):
        rate = RATES_PPS[k % len(RATES_PPS)]
        t = time.monotonic()
        if k % 10 == 9:
            reply = ctl.call("config.load", text=RULES_TEMPLATE % rate, filename="soak.yaml")
            state["loads"] += 1
        else:
            reply = ctl.call("rule.set", name="flood", fields={"rate": "%dpps" % rate})
            state["sets"] += 1
        lat.append(time.monotonic() - t)
        if not reply.get("ok"):
            violations.add("change %d (rate %d pps) refused: %s" % (k, rate, reply.get("error")))
        else:
            g = reply["result"]["generation"]
            if g != gen + 1:
                violations.add("change %d: generation %d after %d (want +1)" % (k, g, gen))
            gen = g
            state["applied"] += 1
    state["planned_changes"] = int((deadline - t0) / CHANGE_PERIOD_S)
    lat.sort()
    if lat:
        state["change_ms_p50"] = 1000 * lat[len(lat) // 2]
        state["change_ms_p99"] = 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        state["change_ms_max"] = 1000 * lat[-1]


def run_reads(args, deadline, state, violations):
    prev_stats, prev_metrics = {}, {}
    t0 = time.monotonic()
    for slot in slots(t0, READ_PERIOD_S, deadline):
        k = slot + 1  # reads are numbered from 1
        t = time.monotonic()
        try:
            body = urllib.request.urlopen(args.metrics, timeout=5).read().decode()
            state["scrape_ms_max"] = max(state["scrape_ms_max"], 1000 * (time.monotonic() - t))
            cur = parse_metrics(body)
            if not cur:
                violations.add("scrape %d: no counter series" % k)
            compare("scrape", prev_metrics, cur, str(k), violations)
            prev_metrics = cur
            state["scrapes"] += 1
        except Exception as e:  # a failed scrape is a finding, not the end of the run
            violations.add("scrape %d failed: %s" % (k, e))
        t = time.monotonic()
        p = subprocess.run([args.sluicectl, "--socket", args.socket, "stats", "--json"],
                           capture_output=True, text=True, timeout=10)
        state["stats_ms_max"] = max(state["stats_ms_max"], 1000 * (time.monotonic() - t))
        if p.returncode != 0:
            violations.add("stats %d: sluicectl exited %d: %s" % (k, p.returncode, p.stderr.strip()))
            continue
        j = json.loads(p.stdout)
        d = j.get("dataplane", {})
        state["mbufs_in_use_max"] = max(state["mbufs_in_use_max"], d.get("mbufs_in_use", 0))
        state["mbufs_total"] = d.get("mbufs_total", 0)
        cur = flatten_stats(j)
        compare("stats", prev_stats, cur, str(k), violations)
        for r in j.get("rules", []) + [j.get("default", {})]:
            if r["matched_packets"] != r["passed_packets"] + r["dropped_packets"]:
                violations.add("stats %d: rule %s matched %d != passed %d + dropped %d"
                               % (k, r["name"], r["matched_packets"], r["passed_packets"],
                                  r["dropped_packets"]))
        prev_stats = cur
        state["reads"] += 1
        state["last_stats"] = j
    state["planned_reads"] = int((deadline - t0) / READ_PERIOD_S)


def fd_targets(pid):
    """What each open fd is (socket:[inode], a path, anon_inode:...), for a failure to name
    the fd that stayed; an fd closed between listdir and readlink is left out."""
    targets = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            targets[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            pass
    return targets


TCP_STATES = {"01": "established", "06": "time-wait", "08": "close-wait", "0A": "listen"}


def describe_sockets(pid, targets):
    """socket:[inode] -> what it is (tcp local/remote/state, unix path), from /proc/PID/net
    (sluiced's network namespace): a leaked connection then says which server holds it."""
    what = {}
    for proto in ("tcp", "tcp6"):
        try:
            lines = open("/proc/%d/net/%s" % (pid, proto)).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local_port, remote_port = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)
            what[f[9]] = "%s :%d <-> :%d %s" % (proto, local_port, remote_port,
                                               TCP_STATES.get(f[3], f[3]))
    try:
        for line in open("/proc/%d/net/unix" % pid).read().splitlines()[1:]:
            f = line.split()
            what[f[6]] = "unix %s" % (f[7] if len(f) > 7 else "(unnamed)")
    except OSError:
        pass
    for proto, inode_col in (("packet", 8), ("netlink", 9)):
        try:
            for line in open("/proc/%d/net/%s" % (pid, proto)).read().splitlines()[1:]:
                f = line.split()
                if len(f) > inode_col:
                    what[f[inode_col]] = proto
        except OSError:
            pass
    for fd, t in targets.items():
        if t.startswith("socket:["):
            targets[fd] = "%s %s" % (t, what.get(t[8:-1], "?"))
    return targets


def sample(pid):
    targets = fd_targets(pid)
    fds = len(targets)
    rss_kb = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return fds, rss_kb, targets


def run_samples(args, t_start, deadline, out, fds_out):
    k = 0
    prev = None
    while True:
        due = t_start + k * SAMPLE_PERIOD_S
        if due > deadline:
            break
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        fds, rss_kb, targets = sample(args.pid)
        t = time.monotonic() - t_start
        out.write("%.3f %d %d\n" % (t, fds, rss_kb))
        out.flush()
        if targets != prev:
            fds_out.write(json.dumps({"t": round(t, 3),
                                      "fds": describe_sockets(args.pid, dict(targets))}) + "\n")
            fds_out.flush()
            prev = targets
        k += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--sluicectl", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    args = ap.parse_args()

    t_start = time.monotonic()
    deadline = t_start + args.seconds
    violations = Violations()
    state = {"sets": 0, "loads": 0, "applied": 0, "scrapes": 0, "reads": 0,
             "mbufs_in_use_max": 0, "mbufs_total": 0,
             "scrape_ms_max": 0.0, "stats_ms_max": 0.0}
    errors = []

    def guarded(fn, *a):
        try:
            fn(*a)
        except Exception as e:
            errors.append("%s: %s" % (fn.__name__, e))
        state["%s_ended_s" % fn.__name__] = round(time.monotonic() - t_start, 3)

    with open(os.path.join(args.dir, "samples.txt"), "w") as samples, \
            open(os.path.join(args.dir, "fds.jsonl"), "w") as fds_out:
        threads = [threading.Thread(target=guarded, args=(run_changes, args, deadline, state, violations)),
                   threading.Thread(target=guarded, args=(run_reads, args, deadline, state, violations)),
                   threading.Thread(target=guarded, args=(run_samples, args, t_start, deadline, samples,
                                                             fds_out))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    last = state.pop("last_stats", None)
    if last is not None:
        with open(os.path.join(args.dir, "last_stats.json"), "w") as f:
            json.dump(last, f)
    state["violations"] = violations.items
    state["violation_count"] = violations.count
    state["errors"] = errors
    with open(os.path.join(args.dir, "driver.json"), "w") as f:
        json.dump(state, f, indent=1)
    print("driver: %d rule.set + %d config.load applied %d; %d scrapes, %d stats reads; "
          "%d violation(s); ran %.1f s" % (state["sets"], state["loads"], state["applied"],
                                           state["scrapes"], state["reads"], violations.count,
                                           time.monotonic() - t_start), file=sys.stderr)
    if errors:
        print("driver: " + "; ".join(errors), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

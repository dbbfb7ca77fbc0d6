"""Seeds of fuzz_pipeline's many-rule mode (fuzz_pipeline_rules.hpp), written value by value
in the order the target reads them (fuzz_input.hpp: a value in [lo, hi] takes 1, 2, 4 or 8
little-endian bytes by the span). make_corpus.py calls seeds()."""
import struct

BYTES, PACKETS = True, False
KEYS = {"none": 0, "src_ip": 1, "dst_ip": 2, "src_dst": 3, "five_tuple": 4,
        "src_prefix": 5, "dst_prefix": 6}
ALGS = {"token_bucket": 0, "gcra": 1, "leaky_bucket": 2, "srtcm": 3, "trtcm": 4,
        "sliding_window": 5, "fixed_window": 6}  # sluice_enums.h


class Input:
    def __init__(self):
        self.out = bytearray()

    def u8(self, v):
        self.out.append(v & 0xFF)

    def flag(self, v):
        self.u8(1 if v else 0)

    def range(self, lo, hi, v):
        assert lo <= v <= hi, (lo, hi, v)
        span, x = hi - lo, v - lo
        fmt = "<B" if span < 0x100 else "<H" if span < 0x10000 else "<I" if span < 1 << 32 else "<Q"
        self.out += struct.pack(fmt, x)

    def u16(self, v):
        self.out += struct.pack("<H", v)

    def u64(self, v):
        self.out += struct.pack("<Q", v)


def action(i, kind="drop", dscp=0):
    i.range(0, 2, {"pass": 0, "drop": 1, "mark": 2}[kind])
    if kind == "mark":
        i.range(0, 63, dscp)


def cidr(i, family, prefix_len, fixed_index):
    i.flag(family == 6)
    i.range(0, 32 if family == 4 else 128, prefix_len)
    i.flag(True)  # one of the fixed addresses (its bytes are replaced by the replica's)
    i.range(0, 4 if family == 4 else 3, fixed_index)


def rule(i, src=None, dst=None, proto=None, dst_port=None, key="five_tuple", alg="token_bucket",
         unit=PACKETS, rate=1000, burst=10, act="drop", max_flows=0):
    """A template; rate is a round rate index (kRound of fuzz_pipeline_rules.hpp) or a value."""
    i.flag(src is not None)
    if src:
        cidr(i, *src)
    i.flag(dst is not None)
    if dst:
        cidr(i, *dst)
    i.flag(proto is not None)
    if proto is not None:
        i.flag(proto == 17)
        if proto != 17:
            i.range(0, 255, proto)
    i.flag(dst_port is not None)
    if dst_port:
        i.range(0, 2000, dst_port[0])
        i.range(0, 2000, dst_port[1] - dst_port[0])
    i.flag(False)  # vlan
    i.flag(False)  # dscp
    i.flag(False)  # ingress port
    i.range(0, 6, KEYS[key])
    if key in ("src_prefix", "dst_prefix"):
        i.range(0, 128, 24)
    i.range(0, 6, ALGS[alg])
    i.flag(unit)
    i.flag(False)  # not a round rate
    i.range(1, 50_000_000_000, rate)
    i.flag(True)  # per second
    if unit:
        i.range(64, 2_000_000, burst)
    else:
        i.range(1, 100_000, burst)
    i.range(0, burst * 2, burst)           # excess burst
    i.range(1, 4, 2)                        # peak rate: twice
    i.range(0, burst, burst)                # peak burst
    i.range(1000, 10_000_000_000, 1_000_000)  # window 1 ms
    i.range(1, 1_000_000, burst)            # window limit
    i.flag(False)                           # limit in packets
    i.range(1, 60_000_000_000, 5_000_000)   # max delay 5 ms
    i.flag(True)                            # no overhead
    action(i, act)
    action(i, "pass"), action(i, "mark", 10), action(i, "drop")  # colours
    i.flag(False)                           # no overflow action
    i.range(0, 64, max_flows)
    i.range(1, 120_000_000_000, 10_000_000_000)



def header(i, templates, n_rules, shape, shared_key="five_tuple", shift4=24, shift6=120,
           default="pass"):
    action(i, default)
    i.u8(192)  # the rule count byte: many rules
    i.range(1, 3, templates)
    i.range(5, 70, n_rules)
    i.range(0, 3, shape)
    i.range(1, 6, KEYS[shared_key])
    i.flag(True), i.range(0, 4, 0)  # base 10.0.0.1
    i.flag(True), i.range(0, 3, 0)  # base 2001:db8::1
    # fuzz_pipeline_rules.hpp's shift bytes: below 32 any shift (v6: 4 times it), else 20 +
    # (v6: 116 +) the byte mod 12
    i.u8(shift4 if shift4 < 20 else 32 + shift4 - 20)
    i.u8(shift6 // 4 if shift6 < 116 else 32 + shift6 - 116)

def template_steps(i, len_step=0, port_step=0, parent=False):
    i.range(0, 3, len_step)
    i.range(0, 63, port_step)
    i.range(0, 3, 0 if parent else 1)


def options(i, max_flows=64, now=1_000_000_000):
    i.u8(7)          # hash seed
    i.flag(True)     # no stale-read tolerance
    i.range(0, 255, max_flows - 1)
    i.u64(now << 1)


def frames(i, specs, step=("ms", 100_000), port=0):
    """One burst: specs are (kind, src j, dst j, l4, dst port, payload)."""
    kind, value = step
    i.range(0, 7, {"same": 0, "ms": 1, "days": 4}[kind])
    if kind == "ms":
        i.range(0, 1_000_000, value)
    elif kind == "days":
        i.range(0, 400 * 86400 * 1_000_000_000, value)
    i.range(1, 64, len(specs))
    for kind, src, dst, l4, dport, payload in specs:
        i.range(0, 15, kind)
        i.range(0, 63, 0)  # dscp
        i.range(0, 79, src)
        i.range(0, 79, dst)
        i.range(0, 3, {"udp": 0, "tcp": 1, "icmp": 2}[l4])
        if l4 in ("udp", "tcp"):
            i.u16(40000 + src)
            i.range(0, 4000, dport)
        i.range(0, 1500, payload)
        i.range(0, 15, 1)  # not truncated
    i.range(0, 3, port)


def common_burst(n, rules, offset=0):
    return [(8, (offset + k) % rules, (offset + 3 * k) % rules, "udp" if k % 3 else "tcp",
             53 + 7 * k, 18 + k % 5 * 100) for k in range(n)]


def seeds():
    out = {}
    # 66 keyed token buckets alike (five-tuple) on /24s 2^22 apart (crowded first buckets): the uniform loops,
    # the tables above 64 rules (summary words).
    i = Input()
    header(i, 1, 66, 1, "five_tuple", shift4=22)
    rule(i, dst=(4, 24, 0), key="five_tuple", rate=1000, burst=2)
    template_steps(i)
    options(i)
    for b in range(2):
        frames(i, common_burst(32, 66, 11 * b), ("same", 0) if b else ("ms", 1000))
    out["many_uniform_siblings"] = bytes(i.out)
    # 70 rules of 2 templates, /32s one apart (clustered: IntervalIndex splits its buckets),
    # nested by a length step, ports shifted: token buckets each keyed by its template's key.
    i = Input()
    header(i, 2, 70, 2, "src_ip", shift4=0)
    rule(i, src=(4, 32, 0), key="src_ip", rate=100, burst=3, dst_port=(0, 100))
    template_steps(i, len_step=1, port_step=5)
    rule(i, dst=(4, 32, 0), key="dst_prefix", rate=50, burst=1, act="mark", proto=17)
    template_steps(i, len_step=2)
    options(i, max_flows=16)
    for b in range(2):
        frames(i, common_burst(32, 80, 17 * b), ("ms", 50_000 * b))
    out["many_keyed_clustered"] = bytes(i.out)
    # 12 rules of 3 templates as fuzzed (a meter, a shaper, a windowed policer with the
    # template as parent), IPv6 and IPv4 prefixes: the general stages among many rules.
    i = Input()
    header(i, 3, 12, 0, shift4=21, shift6=118, default="drop")
    rule(i, src=(6, 64, 0), key="src_ip", alg="srtcm", rate=1000, burst=2)
    template_steps(i)
    rule(i, dst=(4, 28, 0), key="none", alg="leaky_bucket", unit=BYTES, rate=100000, burst=1500)
    template_steps(i, parent=True)
    rule(i, dst_port=(50, 60), key="dst_ip", alg="sliding_window", rate=10, burst=2)
    template_steps(i, port_step=3, parent=True)
    options(i)
    for b in range(2):
        frames(i, [(1 if k % 4 == 0 else 8, k % 12, (k * 5) % 12, "udp", 50 + k, 100)
                   for k in range(24)], ("days", 86400 * 10**9) if b else ("ms", 10))
    out["many_mixed_parents"] = bytes(i.out)
    # 6 keyed srtcm meters (green passes) among keyed token buckets: the per-rule shares of the
    # common-IPv4 burst with meters, not uniform.
    i = Input()
    header(i, 2, 6, 3, "dst_ip", shift4=24)
    rule(i, dst=(4, 16, 0), key="dst_ip", alg="srtcm", rate=200, burst=4)
    template_steps(i)
    rule(i, src=(4, 16, 0), key="five_tuple", rate=300, burst=2)
    template_steps(i)
    options(i)
    for b in range(2):
        frames(i, common_burst(32, 8, b), ("same", 0) if b else ("ms", 0))
    out["many_meters_and_buckets"] = bytes(i.out)
    return out

#!/usr/bin/python3
"""Writes the seed corpora of tests/fuzz/corpus/ (committed; rerun after changing a target's
input layout): a few valid and broken frames, capture files in each supported format, and
random bytes for the targets that read structured values from their input."""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline_seeds  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def eth(ethertype, payload, vlans=()):
    hdr = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01"
    tpids = [0x88A8] * (len(vlans) - 1) + [0x8100] if vlans else []
    for tpid, vid in zip(tpids, vlans):
        hdr += struct.pack("!HH", tpid, vid)
    return hdr + struct.pack("!H", ethertype) + payload


def ipv4(proto, l4, src=b"\x0a\0\0\x01", dst=b"\xc0\0\x02\x01", frag=0, dscp=0):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, dscp << 2, 20 + len(l4), 1, frag, 64, proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + l4


def ipv6(nh, l4, ext=b""):
    src = bytes.fromhex("20010db8000000000000000000000001")
    dst = bytes.fromhex("20010db8000000000000000000000002")
    return struct.pack("!IHBB", 6 << 28, len(ext) + len(l4), nh, 64) + src + dst + ext + l4


def udp(sport, dport, payload=b"x" * 18):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def tcp(sport, dport):
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 1024, 0, 0)


def frames():
    return {
        "ipv4_udp": eth(0x0800, ipv4(17, udp(1234, 53))),
        "ipv4_tcp": eth(0x0800, ipv4(6, tcp(40000, 443), dscp=46)),
        "ipv4_fragment": eth(0x0800, ipv4(17, udp(1, 2), frag=0x2000 | 0)),
        "ipv4_later_fragment": eth(0x0800, ipv4(17, b"y" * 16, frag=100)),
        "ipv6_udp": eth(0x86DD, ipv6(17, udp(5353, 5353))),
        # hop-by-hop (8 bytes) then TCP
        "ipv6_ext_tcp": eth(0x86DD, ipv6(0, tcp(1, 80), ext=bytes([6, 0]) + b"\0" * 6)),
        "qinq_ipv4": eth(0x0800, ipv4(17, udp(9, 9)), vlans=(100, 200)),
        "arp": eth(0x0806, b"\0\x01\x08\0\x06\x04\0\x01" + b"\0" * 20),
        "truncated_ipv4": eth(0x0800, ipv4(17, udp(1, 2)))[:30],
        "bad_ihl": eth(0x0800, b"\x41" + ipv4(17, udp(1, 2))[1:]),
    }


def pcap(records, nsec=False):
    magic = 0xA1B23C4D if nsec else 0xA1B2C3D4
    out = struct.pack("<IHHiIII", magic, 2, 4, 0, 0, 262144, 1)
    for i, data in enumerate(records):
        out += struct.pack("<IIII", 1700000000 + i, 500 * i, len(data), len(data)) + data
    return out


def pcapng(records):
    def block(btype, body):
        body += b"\0" * (-len(body) % 4)
        n = 12 + len(body)
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", 1, 0, 262144))
    for i, data in enumerate(records):
        ts = 1700000000000000 + i * 1000
        out += block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data)) + data)
    return out


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    fr = frames()
    for name, data in fr.items():
        write("frame_parser", name, data)
    recs = [fr["ipv4_udp"], fr["ipv6_udp"], fr["qinq_ipv4"]]
    write("pcap_reader", "usec.pcap", pcap(recs))
    write("pcap_reader", "nsec.pcap", pcap(recs, nsec=True))
    write("pcap_reader", "ng.pcapng", pcapng(recs))
    write("pcap_reader", "truncated_record.pcap", pcap(recs)[:-10])
    # xdp_program: records of [gap code][u16 LE length][frame]; every frame once, then a
    # burst of one frame at one instant (code 0) that runs its rule's bucket dry.
    rec = lambda gap, f: bytes([gap]) + struct.pack("<H", len(f)) + f
    write("xdp_program", "every_frame", b"".join(rec(3, f) for f in fr.values()))
    for name in ("ipv4_udp", "ipv6_ext_tcp", "qinq_ipv4"):
        write("xdp_program", "burst_" + name, b"".join(rec(0, fr[name]) for _ in range(6)))
    rng = random.Random(13)
    for target, sizes in (("pipeline", (64, 256, 1024, 4096)), ("bucket_diff", (32, 128, 512, 2048))):
        for size in sizes:
            write(target, "random_%d" % size, bytes(rng.getrandbits(8) for _ in range(size)))
    for name, data in pipeline_seeds.seeds().items():  # the many-rule mode, value by value
        write("pipeline", name, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

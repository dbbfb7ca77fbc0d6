#!/usr/bin/python3
"""Benchmark helper (scripts/bench_dataplane.sh): random flow order for a sluice-tracegen trace.

  pcap_shuffle.py IN.pcap OUT.pcap [--seed N] [--split PREFIX] [--peer-fields]

Permutes the frames of IN.pcap (timestamps stay in order, only the frames move), so a
round-robin trace in which every flow appears equally often becomes a random-order trace that
still holds every flow. --split also writes PREFIX.q0.pcap and PREFIX.q1.pcap, the frames whose
IPv4 source address is even / odd: two disjoint flow sets of equal size, one per RX queue, as
RSS would spread them (net_pcap has no RSS).
--peer-fields first rewrites two fields for DPDK's examples/qos_meter, which reads them by
offset: the destination MAC's last byte (its input colour) becomes 0 = green, and the IPv4
destination's last byte (its flow index, 256 flows) becomes the source's last byte, so the
trace has 256 destinations (with the IPv4 header checksum fixed). Flows stay as many as
before: the destination is a function of the source.
"""
import argparse
import random
import struct
import sys


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        sys.exit(f"{path}: not a little-endian classic pcap file")
    header, frames, stamps, off = data[:24], [], [], 24
    while off + 16 <= len(data):
        ts_sec, ts_frac, incl, orig = struct.unpack_from("<IIII", data, off)
        off += 16
        frames.append((orig, data[off:off + incl]))
        stamps.append((ts_sec, ts_frac))
        off += incl
    return header, stamps, frames


def write_pcap(path, header, stamps, frames):
    with open(path, "wb") as f:
        f.write(header)
        for (sec, frac), (orig, frame) in zip(stamps, frames):
            f.write(struct.pack("<IIII", sec, frac, len(frame), orig))
            f.write(frame)


def peer_fields(frame):
    """Untagged IPv4 (tracegen's default): dst MAC byte 5, src/dst IPv4 at 26..29/30..33."""
    f = bytearray(frame)
    f[5] = 0
    f[33] = f[29]
    ihl = (f[14] & 0x0F) * 4
    f[24:26] = b"\0\0"
    total = sum(struct.unpack_from(f"!{ihl // 2}H", f, 14))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    struct.pack_into("!H", f, 24, ~total & 0xFFFF)
    return bytes(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--split")
    ap.add_argument("--peer-fields", action="store_true")
    a = ap.parse_args()
    header, stamps, frames = read_pcap(a.inp)
    if a.peer_fields:
        frames = [(orig, peer_fields(fr)) for orig, fr in frames]
    random.Random(a.seed).shuffle(frames)
    write_pcap(a.out, header, stamps, frames)
    if a.split:
        # Untagged IPv4 (tracegen's default): source address at bytes 26..29.
        for q in (0, 1):
            part = [fr for fr in frames if fr[1][29] % 2 == q]
            write_pcap(f"{a.split}.q{q}.pcap", header, stamps[:len(part)], part)


if __name__ == "__main__":
    main()

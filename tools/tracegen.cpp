// sluice-tracegen: writes synthetic Ethernet traces (nanosecond pcap) for the demo, the tests
// and the benchmarks. The same options and seed always give the same file, byte for byte:
// the generator uses its own PRNG and no library distribution whose output may vary.
#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "packet_builder.hpp"
#include "replay/pcap_io.hpp"

namespace {

using sluice::testing::PacketBuilder;

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;

struct Options {
  std::string out;
  uint64_t packets = 1000;
  uint64_t flows = 1;
  double pps = 1000;
  bool poisson = false;
  uint32_t size = 64;        // frame bytes without FCS
  bool size_mix = false;     // simple IMIX: 7 x 64, 4 x 576, 1 x 1500
  double ipv6_share = 0;     // fraction of flows that are IPv6
  int vlan = -1;             // single 802.1Q tag
  int qinq_outer = -1, qinq_inner = -1;
  std::string proto = "udp";
  std::string src_base = "10.1.0.0";
  std::string src6_base = "2001:db8:1::";
  std::string dst = "192.0.2.10";
  std::string dst6 = "2001:db8::10";
  uint16_t dst_port = 53;
  uint16_t src_port_base = 1024;
  bool random_flows = false;  // pick each packet's flow at random instead of round robin
  uint64_t start_ns = 1000000000ull;
  uint64_t seed = 1;
  uint64_t malformed_every = 0;  // every K-th packet is malformed; 0: none
  std::vector<std::string> merge;  // merge these traces into --out instead of generating
};

// ------------------------------------------------------------------ deterministic PRNG

// splitmix64: tiny, fast, and the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform01() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }

 private:
  uint64_t s_;
};

// ------------------------------------------------------------------ command line

void usage() {
  std::fputs(
      "usage: sluice-tracegen --out FILE [options]\n"
      "  --packets N          packets to write (1000)\n"
      "  --flows N            distinct flows: source address src-base + i (1)\n"
      "  --random-flows       pick each packet's flow at random (default: round robin)\n"
      "  --pps R              aggregate packet rate (1000); constant spacing unless --poisson\n"
      "  --poisson            exponential inter-arrival times with mean 1/R\n"
      "  --size S             frame size in bytes, no FCS (64)\n"
      "  --size-mix           IMIX frame sizes: 7x64, 4x576, 1x1500\n"
      "  --ipv6-share X       fraction of flows that are IPv6 (0)\n"
      "  --vlan ID            one 802.1Q tag\n"
      "  --qinq OUTER,INNER   802.1ad + 802.1Q tags\n"
      "  --proto udp|tcp      (udp)\n"
      "  --src-base A         first IPv4 source (10.1.0.0); --src6-base A (2001:db8:1::)\n"
      "  --dst A              IPv4 destination (192.0.2.10); --dst6 A (2001:db8::10)\n"
      "  --dst-port P         (53); --src-port-base P (1024; flow i uses base + i mod 64512)\n"
      "  --start-ns T         first timestamp (1000000000)\n"
      "  --seed N             PRNG seed (1)\n"
      "  --malformed-every K  every K-th packet malformed: truncated, bad IHL or total\n"
      "                       length past the frame, in turn\n"
      "or:    sluice-tracegen --out FILE --merge A.pcap --merge B.pcap ...\n"
      "  merges traces into one, in timestamp order (ties: in the order given)\n",
      stderr);
}

bool parse_number(const std::string& text, uint64_t* out) {
  char* end = nullptr;
  *out = std::strtoull(text.c_str(), &end, 0);
  return !text.empty() && text[0] != '-' && *end == '\0';
}

bool parse_real(const std::string& text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' && std::isfinite(*out);
}

bool parse_qinq(const std::string& text, Options* o) {
  size_t comma = text.find(',');
  uint64_t outer = 0, inner = 0;
  if (comma == std::string::npos || !parse_number(text.substr(0, comma), &outer) ||
      !parse_number(text.substr(comma + 1), &inner) || outer > 4095 || inner > 4095)
    return false;
  o->qinq_outer = int(outer);
  o->qinq_inner = int(inner);
  return true;
}

// Applies one "--name value" option; returns an error message or "".
std::string apply_option(const std::string& name, const std::string& v, Options* o) {
  uint64_t n = 0;
  double x = 0;
  auto number = [&](uint64_t lo, uint64_t hi) { return parse_number(v, &n) && n >= lo && n <= hi; };
  if (name == "out") o->out = v;
  else if (name == "packets") { if (!number(0, UINT64_MAX)) return "bad --packets"; o->packets = n; }
  else if (name == "flows") { if (!number(1, 1u << 24)) return "bad --flows (1..16777216)"; o->flows = n; }
  else if (name == "pps") { if (!parse_real(v, &x) || x <= 0) return "bad --pps"; o->pps = x; }
  else if (name == "size") { if (!number(14, 9000)) return "bad --size (14..9000)"; o->size = uint32_t(n); }
  else if (name == "ipv6-share") { if (!parse_real(v, &x) || x < 0 || x > 1) return "bad --ipv6-share (0..1)"; o->ipv6_share = x; }
  else if (name == "vlan") { if (!number(0, 4095)) return "bad --vlan (0..4095)"; o->vlan = int(n); }
  else if (name == "qinq") { if (!parse_qinq(v, o)) return "bad --qinq (OUTER,INNER)"; }
  else if (name == "proto") { if (v != "udp" && v != "tcp") return "bad --proto (udp|tcp)"; o->proto = v; }
  else if (name == "src-base") o->src_base = v;
  else if (name == "src6-base") o->src6_base = v;
  else if (name == "dst") o->dst = v;
  else if (name == "dst6") o->dst6 = v;
  else if (name == "dst-port") { if (!number(0, 65535)) return "bad --dst-port"; o->dst_port = uint16_t(n); }
  else if (name == "src-port-base") { if (!number(0, 65535)) return "bad --src-port-base"; o->src_port_base = uint16_t(n); }
  else if (name == "start-ns") { if (!number(0, UINT64_MAX)) return "bad --start-ns"; o->start_ns = n; }
  else if (name == "seed") { if (!number(0, UINT64_MAX)) return "bad --seed"; o->seed = n; }
  else if (name == "merge") o->merge.push_back(v);
  else if (name == "malformed-every") { if (!number(0, UINT64_MAX)) return "bad --malformed-every"; o->malformed_every = n; }
  else return "unknown option --" + name;
  return "";
}

// Returns "" on success, "help" for --help, or an error message.
std::string parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") return "help";
    if (a == "--poisson") { o->poisson = true; continue; }
    if (a == "--size-mix") { o->size_mix = true; continue; }
    if (a == "--random-flows") { o->random_flows = true; continue; }
    if (a.rfind("--", 0) != 0) return "unexpected argument '" + a + "'";
    std::string name = a.substr(2), value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return "option --" + name + " needs a value";
    }
    if (std::string err = apply_option(name, value, o); !err.empty()) return err;
  }
  if (o->out.empty()) return "--out FILE is required";
  return "";
}

// ------------------------------------------------------------------ flows and frames

struct Flow {
  bool ipv6 = false;
  std::string src;
  uint16_t src_port = 0;
};

// Address `base` + offset (IPv4: the whole address; IPv6: the low 64 bits).
bool offset_address(const std::string& base, uint64_t offset, bool v6, std::string* out) {
  uint8_t a[16] = {};
  if (inet_pton(v6 ? AF_INET6 : AF_INET, base.c_str(), a) != 1) return false;
  size_t n = v6 ? 16 : 4;
  uint64_t carry = offset;
  for (size_t i = n; i-- > (v6 ? 8 : 0) && carry != 0;) {
    uint64_t sum = a[i] + (carry & 0xff);
    a[i] = uint8_t(sum);
    carry = (carry >> 8) + (sum >> 8);
  }
  char text[INET6_ADDRSTRLEN];
  inet_ntop(v6 ? AF_INET6 : AF_INET, a, text, sizeof text);
  *out = text;
  return true;
}

// IPv6 flows are spread evenly: flow i is IPv6 when floor((i+1)*share) > floor(i*share).
std::string make_flows(const Options& o, std::vector<Flow>* flows) {
  std::string unused;
  if (!offset_address(o.dst, 0, false, &unused)) return "bad --dst '" + o.dst + "' (IPv4)";
  if (!offset_address(o.dst6, 0, true, &unused)) return "bad --dst6 '" + o.dst6 + "' (IPv6)";
  uint64_t v4_count = 0, v6_count = 0;
  for (uint64_t i = 0; i < o.flows; ++i) {
    Flow f;
    f.ipv6 = std::floor(double(i + 1) * o.ipv6_share) > std::floor(double(i) * o.ipv6_share);
    uint64_t index = f.ipv6 ? v6_count++ : v4_count++;
    if (!offset_address(f.ipv6 ? o.src6_base : o.src_base, index, f.ipv6, &f.src))
      return "bad source base address '" + (f.ipv6 ? o.src6_base : o.src_base) + "'";
    f.src_port = uint16_t(o.src_port_base + (i % 64512));
    flows->push_back(f);
  }
  return "";
}

uint32_t pick_size(const Options& o, Rng& rng) {
  if (!o.size_mix) return o.size;
  uint64_t r = rng.below(12);
  return r < 7 ? 64 : r < 11 ? 576 : 1500;
}

std::vector<uint8_t> build_frame(const Options& o, const Flow& f, uint32_t size) {
  PacketBuilder b;
  if (o.qinq_outer >= 0) b.vlan(uint16_t(o.qinq_outer)).vlan(uint16_t(o.qinq_inner));
  else if (o.vlan >= 0) b.vlan(uint16_t(o.vlan));
  if (f.ipv6) b.ipv6(f.src, o.dst6);
  else b.ipv4(f.src, o.dst);
  if (o.proto == "tcp") b.tcp(f.src_port, o.dst_port);
  else b.udp(f.src_port, o.dst_port);
  return b.frame_size(size).build();
}

size_t l3_offset(const Options& o) {
  return 14 + (o.qinq_outer >= 0 ? 8 : o.vlan >= 0 ? 4 : 0);
}

// Breaks a well-formed frame in one of three ways (SPEC §6), chosen by `kind`.
void make_malformed(const Options& o, bool ipv6, uint64_t kind, std::vector<uint8_t>* frame) {
  size_t l3 = l3_offset(o);
  switch (kind % 3) {
    case 0:  // truncated in the middle of the IP header
      frame->resize(l3 + 10);
      break;
    case 1:  // IPv4: IHL below 5 words; IPv6 has no IHL, so cut its header short instead
      if (ipv6) frame->resize(l3 + 30);
      else (*frame)[l3] = 0x43;
      break;
    default: {  // length field claims more bytes than the frame has
      size_t at = l3 + (ipv6 ? 4 : 2);
      uint16_t claimed = uint16_t(frame->size() - l3 + 100);
      (*frame)[at] = uint8_t(claimed >> 8);
      (*frame)[at + 1] = uint8_t(claimed);
      break;
    }
  }
}

uint64_t next_gap_ns(const Options& o, Rng& rng) {
  double mean_ns = 1e9 / o.pps;
  if (!o.poisson) return uint64_t(std::llround(mean_ns));
  double u = rng.uniform01();
  return uint64_t(std::llround(-std::log1p(-u) * mean_ns));
}

// ------------------------------------------------------------------ merging

// Several generated traces into one: how the demo and benchmarks mix flows of different
// rates, sizes and encapsulations.
int merge(const Options& o) {
  std::vector<sluice::PcapPacket> all;
  for (const std::string& path : o.merge) {
    auto reader = sluice::PcapReader::open(path);
    if (!reader) {
      std::fprintf(stderr, "sluice-tracegen: %s\n", reader.error().message.c_str());
      return kExitUsage;
    }
    sluice::PcapPacket p;
    for (;;) {
      auto more = (*reader)->next(&p);
      if (!more) {
        std::fprintf(stderr, "sluice-tracegen: %s\n", more.error().message.c_str());
        return kExitUsage;
      }
      if (!more.value()) break;
      all.push_back(p);
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.ts_ns < b.ts_ns; });
  auto writer = sluice::PcapWriter::create(o.out);
  sluice::Status s = writer ? sluice::Status(sluice::Ok{}) : sluice::Status(writer.error());
  for (size_t i = 0; s && i < all.size(); ++i)
    s = (*writer)->write(all[i].ts_ns, all[i].data.data(), uint32_t(all[i].data.size()), all[i].wire_len);
  if (s) s = (*writer)->close();
  if (!s) {
    std::fprintf(stderr, "sluice-tracegen: %s\n", s.error().message.c_str());
    return kExitRuntime;
  }
  return 0;
}

// ------------------------------------------------------------------ main loop

int generate(const Options& o) {
  std::vector<Flow> flows;
  if (std::string err = make_flows(o, &flows); !err.empty()) {
    std::fprintf(stderr, "sluice-tracegen: %s\n", err.c_str());
    return kExitUsage;
  }
  auto writer = sluice::PcapWriter::create(o.out);
  if (!writer) {
    std::fprintf(stderr, "sluice-tracegen: %s\n", writer.error().message.c_str());
    return kExitRuntime;
  }
  Rng rng(o.seed);
  // Constant spacing accumulates in exact nanoseconds from the start, so N packets at R pps
  // span (N-1)/R seconds without rounding drift.
  double mean_ns = 1e9 / o.pps;
  uint64_t ts = o.start_ns;
  uint64_t malformed = 0;
  for (uint64_t i = 0; i < o.packets; ++i) {
    if (i > 0) ts = o.poisson ? ts + next_gap_ns(o, rng) : o.start_ns + uint64_t(std::llround(double(i) * mean_ns));
    const Flow& f = flows[o.random_flows ? rng.below(flows.size()) : i % flows.size()];
    std::vector<uint8_t> frame = build_frame(o, f, pick_size(o, rng));
    if (o.malformed_every != 0 && (i + 1) % o.malformed_every == 0)
      make_malformed(o, f.ipv6, malformed++, &frame);
    if (auto s = (*writer)->write(ts, frame.data(), uint32_t(frame.size())); !s) {
      std::fprintf(stderr, "sluice-tracegen: %s\n", s.error().message.c_str());
      return kExitRuntime;
    }
  }
  if (auto s = (*writer)->close(); !s) {
    std::fprintf(stderr, "sluice-tracegen: %s\n", s.error().message.c_str());
    return kExitRuntime;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err = parse_args(argc, argv, &o);
  if (err == "help") {
    usage();
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "sluice-tracegen: %s\n", err.c_str());
    usage();
    return kExitUsage;
  }
  if (!o.merge.empty()) return merge(o);
  try {
    return generate(o);
  } catch (const std::exception& e) {  // the packet builder throws on a bad address
    std::fprintf(stderr, "sluice-tracegen: %s\n", e.what());
    return kExitUsage;
  }
}

// sluice-sender: a paced UDP/IPv4 (or TCP) traffic source for the integration tests and the
// demo. Sends Ethernet frames on one interface through an AF_PACKET socket, in sendmmsg
// batches, at --pps for --seconds, and prints what it sent as one JSON line on stdout:
//
//   {"iface": "v0", "target_pps": 40000, "planned": 120000, "packets": 120000, "bytes": ...,
//    "duration_s": 2.99998, "achieved_pps": 39999.9, "max_lag_us": 85, "retries": 0, ...}
//
// Pacing: packet k (k = 0, 1, ...) is due at t0 + k / pps on CLOCK_MONOTONIC, an absolute
// schedule, so a late wake-up never shifts the packets after it: whatever is due is sent at
// once (up to --batch frames per sendmmsg), and the sender sleeps (clock_nanosleep,
// TIMER_ABSTIME, 1 ns timer slack) until the next packet is due. "duration_s" is the time
// between the first and the last send, "achieved_pps" = (packets - 1) / duration_s, the rate
// of the stream that actually left; "max_lag_us" the largest delay of a send behind its due
// time.
//
// Flows: packet k belongs to flow k mod --flows; flow i has source address src-base + i and
// source port src-port-base + (i mod 64512), as sluice-tracegen numbers them.
//
// SIGINT or SIGTERM stops the sending at once and reports what was sent ("stopped": true),
// exit 0: a test that needs traffic for as long as its own steps take gives a generous
// --seconds and stops the sender when it is done, instead of betting on how long they take.
//
// Exit codes: 0 sent (see "packets" against "planned"), 1 runtime failure (socket, interface,
// send error other than a full queue), 2 bad usage.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <type_traits>
#include <vector>

#include "packet_builder.hpp"
#include "result.hpp"

namespace {

using sluice::make_error;
using sluice::Result;
using sluice::testing::PacketBuilder;

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
constexpr unsigned kMaxBatch = 1024;
constexpr size_t kMaxFrame = 9000;
// A full device queue (ENOBUFS/EAGAIN) is retried after this pause.
constexpr uint64_t kRetryPauseNs = 20'000;

volatile std::sig_atomic_t g_stop = 0;  // SIGINT/SIGTERM: stop sending, report

extern "C" void on_stop_signal(int) { g_stop = 1; }

// Without SA_RESTART: a signal ends the sleep or the send it interrupts.
void stop_on_signals() {
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

struct Options {
  std::string iface;
  double pps = 0;
  double seconds = 0;
  uint64_t packets = 0;  // instead of --seconds: exactly this many packets
  uint64_t flows = 1;
  std::string proto = "udp";
  std::string src_base = "198.18.0.1";
  std::string dst = "198.19.0.1";
  uint16_t dst_port = 9;
  uint16_t src_port_base = 1024;
  uint32_t size = 64;  // frame bytes without FCS
  uint8_t dscp = 0;
  std::string src_mac;  // "" = the interface's own
  std::string dst_mac = "02:00:00:00:00:02";
  unsigned batch = 32;
  double grace_s = 1.0;  // after the last due time, give up on what could not be sent
};

void usage(FILE* to) {
  std::fputs(
      "usage: sluice-sender --iface IF --pps R (--seconds S | --packets N) [options]\n"
      "  sends UDP/IPv4 frames on IF through an AF_PACKET socket at R packets/s on an\n"
      "  absolute CLOCK_MONOTONIC schedule; prints one JSON line with what was sent.\n"
      "  --flows N            distinct flows, round robin: source address src-base + i (1)\n"
      "  --src-base A         first IPv4 source (198.18.0.1)\n"
      "  --dst A              IPv4 destination (198.19.0.1)\n"
      "  --dst-port P         destination port (9)\n"
      "  --src-port-base P    flow i uses source port P + (i mod 64512) (1024)\n"
      "  --proto udp|tcp      (udp)\n"
      "  --size S             frame size in bytes without FCS, 42..9000 (64)\n"
      "  --dscp D             DSCP of every packet, 0..63 (0)\n"
      "  --src-mac M          source MAC (the interface's)\n"
      "  --dst-mac M          destination MAC (02:00:00:00:00:02: nobody's, so a kernel\n"
      "                       stack that sees the frame ignores it)\n"
      "  --batch N            frames per sendmmsg call, 1..1024 (32)\n"
      "  --grace S            give up on unsent packets S seconds after the last due time (1)\n"
      "SIGINT/SIGTERM stops sending; what was sent is reported (\"stopped\": true), exit 0\n"
      "exit status: 0 done, 1 runtime failure, 2 bad usage\n",
      to);
}

Result<double> parse_double(const std::string& name, const char* text, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0' || errno == ERANGE || !(v >= lo && v <= hi))
    return make_error("--" + name + ": '" + text + "' is not a number in [" + std::to_string(lo) +
                      ", " + std::to_string(hi) + "]");
  return v;
}

Result<uint64_t> parse_u64(const std::string& name, const char* text, uint64_t lo, uint64_t hi) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (*text == '\0' || *text == '-' || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    return make_error("--" + name + ": '" + text + "' is not an integer in [" + std::to_string(lo) +
                      ", " + std::to_string(hi) + "]");
  return uint64_t(v);
}

Result<bool> parse_mac(const std::string& text, uint8_t out[6]) {
  unsigned b[6];
  char tail;
  if (std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
                  &b[5], &tail) != 6)
    return make_error("'" + text + "' is not a MAC address (xx:xx:xx:xx:xx:xx)");
  for (int i = 0; i < 6; ++i) out[i] = uint8_t(b[i]);
  return true;
}

// Returns "" or the usage error.
std::string parse_args(int argc, char** argv, Options* o, bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return "";
    }
    if (a.rfind("--", 0) != 0) return "unexpected argument '" + a + "'";
    std::string name = a.substr(2), value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      if (i + 1 >= argc) return "option '--" + name + "' needs a value";
      value = argv[++i];
    }
    const char* v = value.c_str();
    std::string err;
    auto num = [&](auto r, auto* dst) {
      if (!r) {
        err = r.error().message;
      } else {
        *dst = static_cast<std::remove_pointer_t<decltype(dst)>>(*r);
      }
    };
    if (name == "iface") o->iface = value;
    else if (name == "pps") num(parse_double(name, v, 1e-3, 1e9), &o->pps);
    else if (name == "seconds") num(parse_double(name, v, 1e-3, 86400), &o->seconds);
    else if (name == "packets") num(parse_u64(name, v, 1, uint64_t(1) << 40), &o->packets);
    else if (name == "flows") num(parse_u64(name, v, 1, uint64_t(1) << 24), &o->flows);
    else if (name == "proto") o->proto = value;
    else if (name == "src-base") o->src_base = value;
    else if (name == "dst") o->dst = value;
    else if (name == "dst-port") num(parse_u64(name, v, 0, 65535), &o->dst_port);
    else if (name == "src-port-base") num(parse_u64(name, v, 0, 65535), &o->src_port_base);
    else if (name == "size") num(parse_u64(name, v, 42, kMaxFrame), &o->size);
    else if (name == "dscp") num(parse_u64(name, v, 0, 63), &o->dscp);
    else if (name == "src-mac") o->src_mac = value;
    else if (name == "dst-mac") o->dst_mac = value;
    else if (name == "batch") num(parse_u64(name, v, 1, kMaxBatch), &o->batch);
    else if (name == "grace") num(parse_double(name, v, 0, 3600), &o->grace_s);
    else return "unknown option '--" + name + "'";
    if (!err.empty()) return err;
  }
  if (o->iface.empty()) return "missing --iface IF";
  if (o->pps <= 0) return "missing --pps R";
  if ((o->seconds > 0) == (o->packets > 0)) return "give exactly one of --seconds S and --packets N";
  if (o->proto != "udp" && o->proto != "tcp") return "--proto: udp or tcp";
  if (o->proto == "tcp" && o->size < 54) return "--size: a TCP/IPv4 frame has at least 54 bytes";
  in_addr probe{};
  if (inet_pton(AF_INET, o->src_base.c_str(), &probe) != 1) return "--src-base: not an IPv4 address";
  if (inet_pton(AF_INET, o->dst.c_str(), &probe) != 1) return "--dst: not an IPv4 address";
  uint8_t mac[6];
  if (auto r = parse_mac(o->dst_mac, mac); !r) return "--dst-mac: " + r.error().message;
  if (!o->src_mac.empty())
    if (auto r = parse_mac(o->src_mac, mac); !r) return "--src-mac: " + r.error().message;
  return "";
}

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

void sleep_until(uint64_t t_ns) {
  timespec ts{time_t(t_ns / 1'000'000'000u), long(t_ns % 1'000'000'000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR && !g_stop) {
  }
}

// The AF_PACKET socket, bound to the interface, sending only (protocol 0: receives nothing).
class PacketSocket {
 public:
  static Result<PacketSocket> open(const std::string& iface, uint8_t mac[6]) {
    const unsigned index = if_nametoindex(iface.c_str());
    if (index == 0) return make_error("interface '" + iface + "': " + std::strerror(errno));
    PacketSocket s;
    s.fd_ = socket(AF_PACKET, SOCK_RAW, 0);
    if (s.fd_ < 0)
      return make_error(std::string("AF_PACKET socket: ") + std::strerror(errno) +
                        (errno == EPERM ? " (needs CAP_NET_RAW)" : ""));
    sockaddr_ll addr{};
    addr.sll_family = AF_PACKET;
    addr.sll_protocol = 0;
    addr.sll_ifindex = int(index);
    if (bind(s.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      return make_error("bind to '" + iface + "': " + std::strerror(errno));
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", iface.c_str());
    if (ioctl(s.fd_, SIOCGIFHWADDR, &ifr) != 0)
      return make_error("MAC address of '" + iface + "': " + std::strerror(errno));
    std::memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
    // A big send buffer: a batch never blocks on socket memory.
    const int sndbuf = 4 << 20;
    setsockopt(s.fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    return s;
  }
  PacketSocket(PacketSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  PacketSocket& operator=(PacketSocket&&) = delete;
  ~PacketSocket() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  PacketSocket() = default;
  int fd_ = -1;
};

// Frames of every flow from one template: only the source address, the IPv4 checksum and the
// source port differ between flows.
class FrameFactory {
 public:
  explicit FrameFactory(const Options& o, const uint8_t src_mac[6], const uint8_t dst_mac[6])
      : flows_(o.flows), src_port_base_(o.src_port_base) {
    PacketBuilder b;
    b.ipv4(o.src_base, o.dst, o.dscp);
    if (o.proto == "tcp") {
      b.tcp(o.src_port_base, o.dst_port);
    } else {
      b.udp(o.src_port_base, o.dst_port);
    }
    b.frame_size(o.size);
    frame_ = b.build();
    std::memcpy(frame_.data(), dst_mac, 6);
    std::memcpy(frame_.data() + 6, src_mac, 6);
    l3_ = b.l3_offset();
    l4_ = b.l4_offset();
    std::memcpy(&src_base_, frame_.data() + l3_ + 12, 4);
    src_base_ = ntohl(src_base_);
  }
  size_t size() const { return frame_.size(); }
  // Writes the frame of packet k (flow k mod flows) into out.
  void fill(uint64_t k, uint8_t* out) const {
    std::memcpy(out, frame_.data(), frame_.size());
    const uint64_t flow = k % flows_;
    const uint32_t src = htonl(uint32_t(src_base_ + flow));
    std::memcpy(out + l3_ + 12, &src, 4);
    out[l3_ + 10] = out[l3_ + 11] = 0;
    const uint16_t ck = PacketBuilder::ipv4_checksum(out + l3_, 20);
    out[l3_ + 10] = uint8_t(ck >> 8);
    out[l3_ + 11] = uint8_t(ck);
    const uint16_t sport = uint16_t(src_port_base_ + flow % 64512);
    out[l4_] = uint8_t(sport >> 8);
    out[l4_ + 1] = uint8_t(sport);
  }

 private:
  std::vector<uint8_t> frame_;
  uint64_t flows_;
  uint16_t src_port_base_;
  size_t l3_ = 14, l4_ = 34;
  uint32_t src_base_ = 0;  // host order
};

struct SendReport {
  uint64_t planned = 0, sent = 0, bytes = 0, retries = 0;
  size_t frame_len = 0;
  uint64_t first_ns = 0, last_ns = 0, max_lag_ns = 0;
  bool stopped = false;  // by SIGINT/SIGTERM before the end
};

class Pacer {
 public:
  Pacer(uint64_t t0_ns, double pps) : t0_ns_(t0_ns), pps_(pps) {}
  // Due time of packet k.
  uint64_t due_ns(uint64_t k) const {
    return t0_ns_ + uint64_t(std::llround(static_cast<long double>(k) * 1e9L / pps_));
  }
  // How many packets are due at `now` (packets 0 .. n-1).
  uint64_t due_count(uint64_t now_ns) const {
    if (now_ns < t0_ns_) return 0;
    uint64_t n = uint64_t(static_cast<long double>(now_ns - t0_ns_) * pps_ / 1e9L) + 1;
    // Rounding of the two conversions may disagree by one: settle it with due_ns itself.
    while (n > 0 && due_ns(n - 1) > now_ns) --n;
    while (due_ns(n) <= now_ns) ++n;
    return n;
  }

 private:
  uint64_t t0_ns_;
  long double pps_;
};

Result<SendReport> run(const Options& o) {
  uint8_t if_mac[6], src_mac[6], dst_mac[6];
  auto sock = PacketSocket::open(o.iface, if_mac);
  if (!sock) return sock.error();
  std::memcpy(src_mac, if_mac, 6);
  if (!o.src_mac.empty()) (void)parse_mac(o.src_mac, src_mac);
  (void)parse_mac(o.dst_mac, dst_mac);

  const FrameFactory frames(o, src_mac, dst_mac);
  const size_t frame_len = frames.size();
  std::vector<uint8_t> buf(size_t(o.batch) * frame_len);
  std::vector<iovec> iov(o.batch);
  std::vector<mmsghdr> msgs(o.batch);

  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake-ups on time, not 50 us late

  SendReport r;
  r.frame_len = frame_len;
  r.planned = o.packets != 0 ? o.packets : uint64_t(std::llround(o.pps * o.seconds));
  if (r.planned == 0) r.planned = 1;
  const uint64_t t0 = mono_ns() + 1'000'000;  // 1 ms from now: set-up is done
  const Pacer pacer(t0, o.pps);
  const uint64_t give_up_ns = pacer.due_ns(r.planned - 1) + uint64_t(o.grace_s * 1e9);

  while (r.sent < r.planned && !g_stop) {
    const uint64_t now = mono_ns();
    const uint64_t due = std::min(pacer.due_count(now), r.planned);
    if (due <= r.sent) {
      if (now >= give_up_ns) break;
      sleep_until(pacer.due_ns(r.sent));
      continue;
    }
    if (now >= give_up_ns) break;
    const unsigned n = unsigned(std::min<uint64_t>(due - r.sent, o.batch));
    for (unsigned i = 0; i < n; ++i) {
      uint8_t* f = buf.data() + size_t(i) * frame_len;
      frames.fill(r.sent + i, f);
      iov[i] = {f, frame_len};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int got = sendmmsg(sock->fd(), msgs.data(), n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS || errno == EAGAIN) {
        ++r.retries;
        sleep_until(mono_ns() + kRetryPauseNs);
        continue;
      }
      return make_error("send on '" + o.iface + "': " + std::strerror(errno));
    }
    const uint64_t after = mono_ns();
    if (got > 0) {
      if (r.sent == 0) r.first_ns = after;
      r.last_ns = after;
      r.max_lag_ns = std::max(r.max_lag_ns, now - pacer.due_ns(r.sent));
      r.sent += unsigned(got);
      r.bytes += uint64_t(got) * frame_len;
    }
    if (unsigned(got) < n) ++r.retries;  // the rest stays due and goes in the next call
  }
  r.stopped = g_stop != 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool help = false;
  if (std::string err = parse_args(argc, argv, &o, &help); !err.empty()) {
    std::fprintf(stderr, "sluice-sender: %s\n", err.c_str());
    usage(stderr);
    return kExitUsage;
  }
  if (help) {
    usage(stdout);
    return 0;
  }
  stop_on_signals();
  auto r = run(o);
  if (!r) {
    std::fprintf(stderr, "sluice-sender: %s\n", r.error().message.c_str());
    return kExitRuntime;
  }
  const double duration_s = r->sent > 1 ? double(r->last_ns - r->first_ns) / 1e9 : 0.0;
  const double achieved = duration_s > 0 ? double(r->sent - 1) / duration_s : 0.0;
  std::printf(
      "{\"iface\": \"%s\", \"target_pps\": %.3f, \"planned\": %llu, \"packets\": %llu, "
      "\"bytes\": %llu, \"frame_size\": %u, \"flows\": %llu, \"duration_s\": %.6f, "
      "\"achieved_pps\": %.3f, \"max_lag_us\": %.1f, \"retries\": %llu, \"unsent\": %llu, \"stopped\": %s}\n",
      o.iface.c_str(), o.pps, static_cast<unsigned long long>(r->planned),
      static_cast<unsigned long long>(r->sent), static_cast<unsigned long long>(r->bytes),
      unsigned(r->frame_len),
      static_cast<unsigned long long>(o.flows), duration_s, achieved, double(r->max_lag_ns) / 1e3,
      static_cast<unsigned long long>(r->retries),
      static_cast<unsigned long long>(r->planned - r->sent), r->stopped ? "true" : "false");
  if (r->sent < r->planned && !r->stopped)
    std::fprintf(stderr, "sluice-sender: %llu of %llu packets could not be sent in time\n",
                 static_cast<unsigned long long>(r->planned - r->sent),
                 static_cast<unsigned long long>(r->planned));
  return 0;
}

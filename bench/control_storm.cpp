// scripts/bench_control.sh's client: storms of rule changes through a live sluiced's control
// socket, and the forwarding rate beside them (see that script's header for the phases).
//
//   sluice-bench-control-storm SOCKET TELEMETRY_SOCKET SECONDS SLUICED_PID
//
// Prints {"phases": [...], "generation": N} on stdout, a line per phase on stderr.
//
// Why C++ and not the python it replaces: on the benchmark's 2 CPUs the client's own CPU comes
// out of the workers' share, so a storm measured what the client cost as much as what a change
// costs sluiced. python spent ~100 us of CPU per request (json, the interpreter's syscalls);
// this client spends a few, so "during / without" is closer to sluiced's own cost.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "control_frame.hpp"
#include "control_rules.hpp"

namespace {

using json = nlohmann::json;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_control: %s\n", why.c_str());
  std::exit(1);
}

double monotonic_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Sleeps until an absolute CLOCK_MONOTONIC time: one syscall, no drift between steps.
void sleep_until(double t) {
  timespec ts{};
  ts.tv_sec = time_t(t);
  ts.tv_nsec = long((t - double(ts.tv_sec)) * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

double client_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

struct CpuSplit {
  double workers = 0;  // threads rte-worker-N
  double control = 0;  // every other thread of sluiced: control socket, stats tick, main
};

// From /proc/PID/task/*/stat (utime and stime, clock ticks).
CpuSplit sluiced_cpu_s(const std::string& pid) {
  static const double hz = double(sysconf(_SC_CLK_TCK));
  CpuSplit split;
  const std::string dir = "/proc/" + pid + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return split;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    // read(2), not an ifstream: a thread that exits between the open and the read (DPDK's
    // telemetry starts one per client connection) makes libstdc++'s filebuf throw.
    const int fd = open((dir + "/" + e->d_name + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    const std::string text(buf, size_t(n));
    const size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = text.substr(open + 1, close - open - 1);
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int i = 0; i <= 12 && rest >> field; ++i)
      if (i == 11 || i == 12) ticks += std::strtod(field.c_str(), nullptr);
    (comm.rfind("rte-worker", 0) == 0 ? split.workers : split.control) += ticks / hz;
  }
  closedir(d);
  return split;
}

int connect_unix(const std::string& path, int type) {
  const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) die(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) die("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    die("connect " + path + ": " + std::strerror(errno));
  return fd;
}

// One connection to sluiced's control socket (docs/CONTROL.md framing).
class Control {
 public:
  explicit Control(const std::string& path) : fd_(connect_unix(path, SOCK_STREAM)) {}
  ~Control() { close(fd_); }

  json call(const std::string& op, json fields = json::object()) {
    fields["version"] = 2;
    fields["id"] = ++id_;
    fields["op"] = op;
    const std::string frame = sluice::wire::encode_frame(fields.dump());
    for (size_t at = 0; at < frame.size();) {
      const ssize_t n = send(fd_, frame.data() + at, frame.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("send to the control socket: " + std::string(std::strerror(errno)));
      at += size_t(n);
    }
    std::optional<std::string> body;
    while (!(body = reader_.next())) {
      if (!reader_.error().empty()) die("control reply: " + reader_.error());
      char buf[1 << 16];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("sluiced closed the control connection");
      reader_.feed(std::string_view(buf, size_t(n)));
    }
    json reply = json::parse(*body);
    if (!reply.value("ok", false)) die(op + " refused: " + reply.value("error", json()).dump());
    return reply["result"];
  }

 private:
  int fd_;
  uint64_t id_ = 0;
  sluice::wire::FrameReader reader_;
};

// Port 1's transmitted packets from DPDK telemetry, and when they were read.
std::pair<uint64_t, double> opackets(const std::string& telemetry) {
  const int fd = connect_unix(telemetry, SOCK_SEQPACKET);
  char buf[1 << 16];
  if (recv(fd, buf, sizeof buf, 0) <= 0) die("telemetry: no greeting");
  const char query[] = "/ethdev/stats,1";
  if (send(fd, query, sizeof query - 1, 0) < 0) die("telemetry: send");
  const ssize_t n = recv(fd, buf, sizeof buf, 0);
  close(fd);
  if (n <= 0) die("telemetry: no reply");
  const json reply = json::parse(std::string_view(buf, size_t(n)));
  return {reply.at("/ethdev/stats").at("opackets").get<uint64_t>(), monotonic_s()};
}

constexpr double kWindowS = 0.5;

struct Totals {
  uint64_t packets = 0;
  double seconds = 0, worker_cpu = 0, control_cpu = 0, client_cpu = 0;
};

// Alternates windows of kWindowS without changes and with step() back to back (or, with
// pace_hz, one step every 1/pace_hz s), for `duration` s in all: the forwarding rates of both
// come from the same stretch of time, so the load others put on the machine weighs on both.
json phase(const std::string& name, double duration, const std::string& telemetry,
           const std::string& pid, const std::function<json(size_t)>& step,
           int changes_per_step, int pace_hz = 0) {
  std::vector<double> latency;  // request to reply, s
  std::vector<uint64_t> applied;  // sluiced's own applied_us: its read -> every worker
  Totals idle, storm;
  const double end = monotonic_s() + duration;
  while (monotonic_s() < end) {
    for (Totals* t : {&idle, &storm}) {
      const auto [o0, t0] = opackets(telemetry);
      const CpuSplit c0 = sluiced_cpu_s(pid);
      const double k0 = client_cpu_s();
      double slot = t0;
      while (monotonic_s() < t0 + kWindowS) {
        if (t == &idle) {
          sleep_until(monotonic_s() + 0.01);
          continue;
        }
        if (pace_hz) {
          slot += 1.0 / pace_hz;
          if (slot > monotonic_s()) sleep_until(slot);
        }
        const double s = monotonic_s();
        const json result = step(latency.size());
        latency.push_back(monotonic_s() - s);
        if (result.contains("applied_us")) applied.push_back(result["applied_us"].get<uint64_t>());
      }
      const auto [o1, t1] = opackets(telemetry);
      const CpuSplit c1 = sluiced_cpu_s(pid);
      t->client_cpu += client_cpu_s() - k0;
      t->control_cpu += c1.control - c0.control;
      t->worker_cpu += c1.workers - c0.workers;
      t->packets += o1 - o0;
      t->seconds += t1 - t0;
    }
  }
  std::sort(latency.begin(), latency.end());
  std::sort(applied.begin(), applied.end());
  if (latency.empty()) die(name + ": no request in " + std::to_string(duration) + " s");
  if (applied.size() != latency.size())
    die(std::to_string(latency.size() - applied.size()) + " of " +
        std::to_string(latency.size()) + " writes' replies had no applied_us");
  double sum = 0;
  for (double l : latency) sum += l;
  const size_t n = latency.size();
  const double requests = double(n);
  json out = {
      {"phase", name},
      {"idle_mpps", double(idle.packets) / idle.seconds / 1e6},
      {"storm_mpps", double(storm.packets) / storm.seconds / 1e6},
      {"idle_worker_cpus", idle.worker_cpu / idle.seconds},  // CPUs the 2 workers got, of 2
      {"storm_worker_cpus", storm.worker_cpu / storm.seconds},
      {"storm_seconds", storm.seconds},
      {"requests", n},
      {"changes", n * size_t(changes_per_step)},
      {"changes_per_s", requests * changes_per_step / sum},
      {"paced_changes_per_s", requests * changes_per_step / storm.seconds},
      {"pace_hz", pace_hz},
      // sluiced's threads but the workers, and this client: what the storm takes from the
      // workers' two CPUs (CPU ms per second of window).
      {"others_cpu_ms_per_s_idle", (idle.control_cpu + idle.client_cpu) * 1e3 / idle.seconds},
      {"others_cpu_ms_per_s_storm", (storm.control_cpu + storm.client_cpu) * 1e3 / storm.seconds},
      {"client_cpu_ms_per_request", storm.client_cpu * 1e3 / requests},
      {"p50_us", latency[n / 2] * 1e6},
      {"p99_us", latency[n * 99 / 100] * 1e6},
      {"max_us", latency.back() * 1e6},
      {"applied_p50_us", applied[n / 2]},
      {"applied_p99_us", applied[n * 99 / 100]},
      {"applied_max_us", applied.back()},
      {"control_cpu_ms_per_request", storm.control_cpu * 1e3 / requests},
      // What the control threads spend anyway, from the idle windows, taken off the storm's.
      {"control_cpu_idle_ms_per_s", idle.control_cpu * 1e3 / idle.seconds},
      {"control_cpu_ms_per_request_net",
       (storm.control_cpu - idle.control_cpu / idle.seconds * storm.seconds) * 1e3 / requests},
  };
  std::fprintf(stderr, "bench_control: %s\n", out.dump().c_str());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s SOCKET TELEMETRY_SOCKET SECONDS SLUICED_PID\n", argv[0]);
    return 2;
  }
  const std::string sock = argv[1], telemetry = argv[2], pid = argv[4];
  const double duration = std::strtod(argv[3], nullptr);
  if (!(duration > 0)) die("SECONDS must be positive");

  Control c(sock);
  // The socket is up before the workers are: writes are refused until the dataplane runs.
  const double deadline = monotonic_s() + 60;
  while (!c.call("hello").value("writable", false)) {
    if (monotonic_s() > deadline) die("sluiced's control socket stayed read-only for 60 s");
    sleep_until(monotonic_s() + 0.2);
  }
  auto set_rate = [&](size_t i) {
    return c.call("rule.set", {{"name", "per-flow"},
                               {"fields", {{"rate", i % 2 == 0 ? "2Mpps" : "1Mpps"}}}});
  };
  const std::string files[2] = {bench::control_rules_file(1000, 0),
                                bench::control_rules_file(1000, 1)};
  auto load = [&](size_t i) {
    return c.call("config.load", {{"text", files[(i + 1) % 2]}, {"filename", "rules-1000.yaml"}});
  };
  json phases = json::array();
  phases.push_back(phase("rule.set, 1 rule running", duration, telemetry, pid, set_rate, 1));
  // Paced: what a steady stream of changes costs the workers, beside the flat-out storms whose
  // own CPU (client and control threads) comes out of the workers' two CPUs on this rig.
  phases.push_back(phase("paced: rule.set 1,000/s, 1 rule running", duration, telemetry, pid,
                         set_rate, 1, 1000));
  c.call("config.load", {{"text", files[0]}, {"filename", "rules-1000.yaml"}});
  phases.push_back(phase("rule.set, 1,000 rules running", duration, telemetry, pid, set_rate, 1));
  phases.push_back(phase("config.load of 1,000 rules, all changed", duration, telemetry, pid,
                         load, 1000));
  phases.push_back(phase("paced: config.load of 1,000 rules 10/s", duration, telemetry, pid,
                         load, 1000, 10));
  c.call("config.load", {{"text", files[0]}, {"filename", "rules-1000.yaml"}});
  const json out = {{"phases", phases}, {"generation", c.call("rules")["generation"]}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

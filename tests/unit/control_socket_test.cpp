// The control socket end to end without a dataplane: the counters' wire text, sluiced's
// ControlServer on a real Unix socket speaking protocol v2, and sluicectl's SocketBackend
// talking to it (SPEC §1 sluicectl, §4 mode 0600, §6 a malformed request changes nothing);
// and the server under abuse (issue 13): stalled, trickling, idle, never-reading, oversized
// and foreign clients delay no other client and change nothing.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <atomic>
#include <algorithm>

#include "control_frame.hpp"
#include "control_messages.hpp"
#include "control_server.hpp"
#include "counters_json.hpp"
#include "counters_wire.hpp"
#include "rules_loader.hpp"
#include "scripted_rules_target.hpp"
#include "socket_backend.hpp"

using namespace sluice;
namespace fs = std::filesystem;

namespace {

CountersSnapshot sample_snapshot() {
  CountersSnapshot s;
  RuleSnapshot a;
  a.name = "per-source";
  a.traffic.add(Outcome::matched, 1500);
  a.traffic.add(Outcome::dropped, 1500);
  a.active_flows = 7;
  a.flows_evicted = 2;
  s.rules.push_back(a);
  RuleSnapshot b;
  b.name = "udp.only_2";
  b.traffic.packets[size_t(Outcome::red)] = 18446744073709551615ull;  // the largest counter
  s.rules.push_back(b);
  s.default_rule.name = "default";
  s.default_rule.traffic.add(Outcome::passed, 64);
  s.ports.push_back({3, 10, 9, 1, 640, 576});
  s.dataplane = {{"rx_packets", 10, false}, {"dropped_tx_buffer_full", 1, false},
                 {"mbufs_in_use", 77, true}};
  return s;
}

TEST(CountersWire, RoundTripsEveryCounterOfRulesDefaultAndPorts) {
  const CountersSnapshot s = sample_snapshot();
  auto back = decode_counters(encode_counters(s));
  ASSERT_TRUE(back) << back.error().message;
  // The JSON rendering names every counter: equal JSON, equal snapshots.
  EXPECT_EQ(counters_to_json(*back), counters_to_json(s));
  EXPECT_EQ(back->rules.at(1).traffic.pkts(Outcome::red), 18446744073709551615ull);
  EXPECT_EQ(back->ports.at(0).port, 3);
  EXPECT_EQ(back->ports.at(0).tx_bytes, 576u);
  ASSERT_EQ(back->dataplane.size(), 3u);
  EXPECT_EQ(back->dataplane[1].name, "dropped_tx_buffer_full");
  EXPECT_EQ(back->dataplane[1].value, 1u);
  EXPECT_FALSE(back->dataplane[1].gauge);
  EXPECT_EQ(back->dataplane[2].name, "mbufs_in_use");
  EXPECT_EQ(back->dataplane[2].value, 77u);
  EXPECT_TRUE(back->dataplane[2].gauge);
}

TEST(CountersWire, SkipsCountersItDoesNotKnow) {
  auto back = decode_counters("rule a matched_packets 3 future_counter 9\ndefault default\n");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->rules.at(0).traffic.pkts(Outcome::matched), 3u);
}

TEST(CountersWire, RejectsMalformedTextWithTheLine) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"rule a matched_packets\ndefault default\n", "line 1: a counter without a value"},
      {"default default\nrule a matched_packets -1\n", "line 2: counter matched_packets: not a number: -1"},
      {"rule a matched_packets 18446744073709551616\ndefault default\n", "not a number"},
      {"flow x\ndefault default\n", "line 1: unknown kind flow"},
      {"port 70000 rx_packets 1\ndefault default\n", "not a port number: 70000"},
      {"default default\ndataplane totals rx 1\n", "line 2: dataplane: expected counters or gauges"},
      {"default default\ndataplane gauges rx x\n", "counter rx: not a number: x"},
      {"rule\n", "line 1: expected a kind and a name"},
      {"rule a matched_packets 1\n", "no line for the default rule"},
      {"", "no line for the default rule"},
  };
  for (const auto& c : cases) {
    auto r = decode_counters(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
}

constexpr const char* kRules = R"(
default: {action: pass}
rules:
  - {name: udp-only, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, action: drop}
  - {name: per-source, match: {proto: tcp, dst-port: 80}, key: src-ip, rate: 2Mbit, burst: 3000B, action: mark-dscp:10}
)";

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int connect_to(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void send_bytes(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(size_t(n));
  }
}

// The next reply frame's body, or "" if the server closed or nothing came within timeout_ms.
std::string read_reply(int fd, wire::FrameReader& reader, int timeout_ms = 5000) {
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  for (;;) {
    if (auto body = reader.next()) return *body;
    timeval tv{0, 10000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) return "";
    if (n > 0) reader.feed(std::string_view(buf, size_t(n)));
    if (Clock::now() > until) return "";
  }
}

std::string request(const char* op, uint64_t id = 1) {
  return wire::encode_frame("{\"version\":2,\"id\":" + std::to_string(id) + ",\"op\":\"" + op + "\"}");
}

// One whole request on a fresh connection: the reply's body ("" if none).
std::string exchange(const std::string& path, const std::string& bytes, int timeout_ms = 5000) {
  const int fd = connect_to(path);
  if (fd < 0) return "";
  send_bytes(fd, bytes);
  wire::FrameReader reader(size_t{64} << 20);
  std::string reply = read_reply(fd, reader, timeout_ms);
  close(fd);
  return reply;
}

// Whether the server closes `fd` within timeout_ms (reading and dropping what it sends).
bool closed_within(int fd, int timeout_ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  timeval tv{0, 20000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (Clock::now() < until) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  }
  return false;
}

// Latencies of `count` stats requests, each on a new connection, in ms, sorted.
std::vector<double> stats_latencies(const std::string& path, int count) {
  std::vector<double> ms;
  for (int i = 0; i < count; ++i) {
    const auto t = Clock::now();
    const std::string reply = exchange(path, request("stats"), 5000);
    ms.push_back(reply.find("\"ok\":true") != std::string::npos ? ms_since(t) : 1e9);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

// "Another client is answered within 100 ms": 18 of 20 well within it, none near the
// deadlines that end a bad client (seconds), on a machine shared with other builds.
void expect_prompt(const std::vector<double>& ms) {
  ASSERT_EQ(ms.size(), 20u);
  EXPECT_LT(ms[17], 100.0) << "p90 " << ms[17] << " ms, max " << ms.back() << " ms";
  EXPECT_LT(ms.back(), 1000.0) << "max " << ms.back() << " ms";
}

class ControlSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice-control-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto rules = load_rules_text(kRules, "rules.yaml");
    ASSERT_TRUE(rules) << rules.error().message;
    rules_ = *rules;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string sock() const { return (dir_ / "s.sock").string(); }
  std::unique_ptr<ControlServer> serve(ControlLimits limits = {}, RulesTarget* target = nullptr) {
    auto server = ControlServer::start(sock(), rules_, target, limits);
    EXPECT_TRUE(server) << server.error().message;
    if (!server) return nullptr;
    (*server)->publish(sample_snapshot());
    return std::move(server).value();
  }

  fs::path dir_;
  RuleSet rules_;
};

TEST_F(ControlSocket, ListensWithMode0600AndRemovesTheSocketWhenDone) {
  {
    auto server = ControlServer::start(sock(), rules_);
    ASSERT_TRUE(server) << server.error().message;
    struct stat st{};
    ASSERT_EQ(lstat(sock().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, geteuid());
  }
  EXPECT_FALSE(fs::exists(sock()));
}

TEST_F(ControlSocket, CreatesAMissingDirectoryPrivateToItsOwner) {
  const std::string path = (dir_ / "run" / "s.sock").string();
  auto server = ControlServer::start(path, rules_);
  ASSERT_TRUE(server) << server.error().message;
  EXPECT_EQ(fs::status(dir_ / "run").permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(ControlSocket, AnswersStatsOnlyOncePublishedAndThenTheLatestFigures) {
  auto server = ControlServer::start(sock(), rules_);
  ASSERT_TRUE(server) << server.error().message;
  ctl::SocketBackend backend(sock());
  auto before = backend.stats();
  ASSERT_FALSE(before);
  EXPECT_NE(before.value.error().message.find("not set up yet"), std::string::npos)
      << before.value.error().message;

  CountersSnapshot s = sample_snapshot();
  (*server)->publish(s);
  auto first = backend.stats();
  ASSERT_TRUE(first) << first.value.error().message;
  EXPECT_EQ(counters_to_json(*first.value), counters_to_json(s));
  s.default_rule.traffic.add(Outcome::passed, 64);
  (*server)->publish(s);
  auto second = backend.stats();
  ASSERT_TRUE(second);
  EXPECT_EQ(second.value->default_rule.traffic.pkts(Outcome::passed), 2u);
}

TEST_F(ControlSocket, RulesComeBackAsTheSameRuleSet) {
  auto server = serve();
  auto rules = ctl::SocketBackend(sock()).rules();
  ASSERT_TRUE(rules) << rules.value.error().message;
  ASSERT_EQ(rules.value->rules.size(), 2u);
  EXPECT_EQ(rules.value->rules[1].name, "per-source");
  EXPECT_EQ(dump_rules_yaml(*rules.value), dump_rules_yaml(rules_));
}

TEST_F(ControlSocket, AReadOnlyServerRefusesWritesAsUnsupported) {
  auto server = serve();
  auto r = ctl::SocketBackend(sock()).delete_rule("udp-only", {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure, ctl::Failure::runtime);
  EXPECT_NE(r.value.error().message.find("cannot change its rules while it runs"), std::string::npos)
      << r.value.error().message;
}

TEST_F(ControlSocket, WritesThroughTheSocketApplyAndStaleOnesConflict) {
  auto target = test::ScriptedRulesTarget::create(rules_);
  ASSERT_TRUE(target);
  auto server = serve({}, target.get());
  ctl::SocketBackend backend(sock());
  auto set = backend.set_rule("udp-only", {{"rate", "2kpps"}}, {});
  ASSERT_TRUE(set) << set.value.error().message;
  EXPECT_EQ(set.value->generation, 2u);
  EXPECT_EQ(format_rules_diff(set.value->diff).substr(0, 32), "~ udp-only: rate (buckets kept)\n");
  auto stale = backend.delete_rule("udp-only", ctl::WriteOptions{1});
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.failure, ctl::Failure::runtime);
  EXPECT_NE(stale.value.error().message.find("rules changed since generation 1 (now 2)"), std::string::npos)
      << stale.value.error().message;
  auto bad = backend.load_config("rules:\n  - {name: a, rate: x}\n", "new.yaml", {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.failure, ctl::Failure::usage);
  EXPECT_NE(bad.value.error().message.find("new.yaml:2"), std::string::npos) << bad.value.error().message;
  EXPECT_EQ(target->generation(), 2u);
}

TEST_F(ControlSocket, ATargetAttachedAfterTheStartMakesItWritableAndDetachingReadOnly) {
  auto server = serve();  // as sluiced starts it: before the dataplane exists
  ctl::SocketBackend backend(sock());
  EXPECT_EQ(backend.delete_rule("udp-only", {}).failure, ctl::Failure::runtime);
  auto target = test::ScriptedRulesTarget::create(rules_);
  server->set_target(target.get());
  EXPECT_NE(exchange(sock(), request("hello")).find("\"writable\":true"), std::string::npos);
  auto del = backend.delete_rule("udp-only", {});
  ASSERT_TRUE(del) << del.value.error().message;
  EXPECT_EQ(target->rules().rules.size(), 1u);
  server->set_target(nullptr);
  auto refused = backend.delete_rule("per-source", {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.value.error().message.find("cannot change its rules"), std::string::npos);
  EXPECT_EQ(target->rules().rules.size(), 1u);
}

TEST_F(ControlSocket, MalformedRequestsGetAnErrorAndTheServerKeepsServing) {
  auto server = serve();
  const struct {
    std::string bytes;
    const char* says;
  } cases[] = {
      {"garbage\n", "starts with its length in decimal"},
      {"stats\n", "starts with its length in decimal"},  // protocol v1
      {std::string("\x00\x9f\xff\x01\x02", 5), "got byte 0"},
      {"GET /metrics HTTP/1.1\r\n\r\n", "starts with its length"},
      {"100000000\n", "over the limit"},
      {"16777217\n", "over the limit of 16777216 bytes"},
      {wire::encode_frame("{not json"), "not a JSON document"},
      {wire::encode_frame("{\"version\":1,\"id\":3,\"op\":\"stats\"}"), "protocol version 1"},
      {wire::encode_frame("{\"version\":2,\"id\":3,\"op\":\"reboot\"}"), "unknown op"},
  };
  for (const auto& c : cases) {
    const std::string reply = exchange(sock(), c.bytes);
    EXPECT_NE(reply.find(c.says), std::string::npos) << c.bytes << " -> " << reply;
    EXPECT_NE(reply.find("\"ok\":false"), std::string::npos) << reply;
  }
  EXPECT_TRUE(ctl::SocketBackend(sock()).stats());
}

TEST_F(ControlSocket, ABadRequestInAGoodFrameKeepsTheConnectionAndRequestsMayBePipelined) {
  auto server = serve();
  const int fd = connect_to(sock());
  ASSERT_GE(fd, 0);
  send_bytes(fd, wire::encode_frame("[]") + request("hello", 2) + request("rules", 3));
  wire::FrameReader reader;
  EXPECT_NE(read_reply(fd, reader).find("a JSON object, not array"), std::string::npos);
  EXPECT_NE(read_reply(fd, reader).find("\"id\":2,\"ok\":true"), std::string::npos);
  const std::string rules = read_reply(fd, reader);
  EXPECT_NE(rules.find("\"id\":3,\"ok\":true"), std::string::npos) << rules;
  EXPECT_NE(rules.find("per-source"), std::string::npos);
  close(fd);
}

TEST_F(ControlSocket, ManyClientsAtOnceAreAllAnswered) {
  auto server = serve();
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 32; ++t)
    clients.emplace_back([&] {
      for (int i = 0; i < 20; ++i)
        if (exchange(sock(), request(i % 2 ? "stats" : "rules")).find("\"ok\":true") != std::string::npos)
          ++ok;
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 32 * 20);
}

TEST_F(ControlSocket, StalledTricklingAndHalfSentClientsDelayNoOtherClient) {
  auto server = serve();
  // Stalled: half a request, then nothing. Half-sent: a header announcing more than it sends.
  const int stalled = connect_to(sock());
  send_bytes(stalled, "4");
  const int half = connect_to(sock());
  send_bytes(half, "1000\n{\"version\":2,");
  // Trickling: a byte every 100 ms (a request that would take minutes).
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    const int fd = connect_to(sock());
    const std::string body = std::string(5000, ' ');
    const std::string frame = wire::encode_frame(body);
    for (size_t i = 0; i < frame.size() && !stop; ++i) {
      send_bytes(fd, frame.substr(i, 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expect_prompt(stats_latencies(sock(), 20));
  stop = true;
  trickler.join();
  close(stalled);
  close(half);
}

TEST_F(ControlSocket, AHalfSentRequestIsCutOffAtItsDeadlineWithAnError) {
  ControlLimits limits;
  limits.request_deadline_ms = 300;
  auto server = serve(limits);
  const int fd = connect_to(sock());
  const auto start = Clock::now();
  send_bytes(fd, "50\n{\"version\":2");
  wire::FrameReader reader;
  const std::string reply = read_reply(fd, reader, 3000);
  EXPECT_NE(reply.find("the request was not complete within 300 ms"), std::string::npos) << reply;
  EXPECT_GE(ms_since(start), 250.0);
  EXPECT_TRUE(closed_within(fd, 3000));
  close(fd);
  // A byte per 100 ms is cut off at the same deadline: it is one for the whole request.
  const int trickle = connect_to(sock());
  std::string got;
  wire::FrameReader r2;
  const auto t2 = Clock::now();
  for (int i = 0; i < 30 && got.empty(); ++i) {
    send_bytes(trickle, i == 0 ? "90\n" : " ");
    got = read_reply(trickle, r2, 100);
  }
  EXPECT_NE(got.find("not complete within 300 ms"), std::string::npos) << got;
  EXPECT_LT(ms_since(t2), 2000.0);
  close(trickle);
}

TEST_F(ControlSocket, AThousandIdleConnectionsAndAnotherClientIsStillAnswered) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 4096) {
    lim.rlim_cur = std::min<rlim_t>(std::max<rlim_t>(lim.rlim_max, 4096), 4096);
    lim.rlim_max = std::max(lim.rlim_max, lim.rlim_cur);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0) << "need 4096 descriptors: " << std::strerror(errno);
  }
  auto server = serve();
  std::vector<int> idle;
  for (int i = 0; i < 1000; ++i) {
    const int fd = connect_to(sock());
    ASSERT_GE(fd, 0) << i << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  for (int i = 0; i < 100 && server->connections() < 1000; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server->connections(), 1000u);
  expect_prompt(stats_latencies(sock(), 20));
  for (int fd : idle) close(fd);
}

TEST_F(ControlSocket, ConnectionsBeyondTheCapAreRefusedWithAnError) {
  ControlLimits limits;
  limits.max_connections = 4;
  auto server = serve(limits);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(connect_to(sock()));
  for (int i = 0; i < 100 && server->connections() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string refused = exchange(sock(), request("stats"));
  EXPECT_NE(refused.find("too many connections (4)"), std::string::npos) << refused;
  close(held.back());
  held.pop_back();
  for (int i = 0; i < 100 && server->connections() > 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_NE(exchange(sock(), request("stats")).find("\"ok\":true"), std::string::npos);
  for (int fd : held) close(fd);
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

TEST_F(ControlSocket, AHundredMegabyteRequestIsRefusedWithoutBeingBuffered) {
  auto server = serve();
  const long before = rss_kib();
  const int fd = connect_to(sock());
  // 16 MiB + 1 announced: refused from the header, while the client keeps sending.
  std::atomic<bool> done{false};
  std::thread sender([&] {
    send_bytes(fd, "16777217\n");
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 100 && !done; ++i) send_bytes(fd, chunk);  // 100 MB
  });
  wire::FrameReader reader;
  const std::string reply = read_reply(fd, reader, 5000);
  done = true;
  EXPECT_NE(reply.find("over the limit of 16777216 bytes"), std::string::npos) << reply;
  shutdown(fd, SHUT_RDWR);
  sender.join();
  close(fd);
  EXPECT_LT(rss_kib() - before, 32 * 1024) << "the server must not hold the request";
  // A request of 16 MiB exactly is read whole (and refused for what it says, not its size).
  const std::string big = wire::encode_frame("\"" + std::string(wire::kMaxFrameBytes - 2, 'a') + "\"");
  EXPECT_NE(exchange(sock(), big, 20000).find("a JSON object, not string"), std::string::npos);
}

TEST_F(ControlSocket, AClientThatNeverReadsItsReplyIsDroppedAndDelaysNoOne) {
  // Rules whose dump is far larger than a socket buffer.
  RuleSet many = rules_;
  for (int i = 0; i < 3000; ++i) {
    Rule r = rules_.rules[0];
    r.name = "bulk-" + std::to_string(i);
    many.rules.push_back(r);
  }
  auto reloaded = load_rules_text(dump_rules_yaml(many), "many");
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  rules_ = *reloaded;
  ControlLimits limits;
  limits.reply_deadline_ms = 300;
  auto server = serve(limits);
  std::vector<int> deaf;
  for (int i = 0; i < 5; ++i) {
    const int fd = connect_to(sock());
    send_bytes(fd, request("rules"));
    deaf.push_back(fd);
  }
  expect_prompt(stats_latencies(sock(), 20));
  for (int i = 0; i < 200 && server->connections() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server->connections(), 0u) << "clients that never read are dropped at the deadline";
  for (int fd : deaf) close(fd);
}

// A RulesTarget whose apply takes a while (an RCU grace period, a big rule set).
class SlowTarget final : public RulesTarget {
 public:
  explicit SlowTarget(RulesTarget* inner) : inner_(inner) {}
  RuleSet rules() const override { return inner_->rules(); }
  uint64_t generation() const override { return inner_->generation(); }
  Result<RulesDiff> apply(RuleSet next) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return inner_->apply(std::move(next));
  }
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& q) override { return inner_->top_flows(q); }

 private:
  RulesTarget* inner_;
};

TEST_F(ControlSocket, AWriteBeingAppliedDelaysNoRead) {
  auto inner = test::ScriptedRulesTarget::create(rules_);
  SlowTarget slow(inner.get());
  auto server = serve({}, &slow);
  std::thread writer([&] {
    for (int i = 0; i < 3; ++i) {
      auto r = ctl::SocketBackend(sock()).set_rule("udp-only", {{"burst", std::to_string(20 + i)}}, {});
      EXPECT_TRUE(r) << r.value.error().message;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  expect_prompt(stats_latencies(sock(), 20));
  writer.join();
  EXPECT_EQ(inner->generation(), 4u);
}

TEST_F(ControlSocket, APeerOfAnotherUidIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as another user";
  const passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  auto server = serve();
  // Mode 0600 keeps others out at connect(): open it up to reach the SO_PEERCRED check.
  fs::permissions(dir_, fs::perms::all);
  auto run_as_nobody = [&](bool expect_connect) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0) _exit(10);
      const int fd = connect_to(sock());
      if (fd < 0) _exit(errno == EACCES ? 20 : 21);
      send_bytes(fd, request("hello"));
      wire::FrameReader reader;
      const std::string reply = read_reply(fd, reader);
      _exit(reply.find("permission denied: uid " + std::to_string(nobody->pw_uid)) != std::string::npos ? 30 : 31);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), expect_connect ? 30 : 20);
  };
  run_as_nobody(false);  // 0600: the kernel refuses the connect
  chmod(sock().c_str(), 0666);
  run_as_nobody(true);   // the server refuses the peer
  EXPECT_NE(exchange(sock(), request("hello")).find("\"ok\":true"), std::string::npos);
}

TEST_F(ControlSocket, ReplacesAStaleSocketButNotALiveOneOrAnotherFile) {
  {
    // A socket file nobody listens on, as a killed sluiced leaves it.
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, sock().c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd);
  }
  auto server = ControlServer::start(sock(), rules_);
  ASSERT_TRUE(server) << server.error().message;
  auto second = ControlServer::start(sock(), rules_);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("another process"), std::string::npos);
  EXPECT_TRUE(ctl::SocketBackend(sock()).rules()) << "the first server must keep its socket";

  const std::string file = (dir_ / "plain").string();
  std::ofstream(file) << "not a socket";
  auto on_file = ControlServer::start(file, rules_);
  ASSERT_FALSE(on_file);
  EXPECT_NE(on_file.error().message.find("exists and is not a socket"), std::string::npos);
  EXPECT_TRUE(fs::exists(file));
  auto too_long = ControlServer::start("/tmp/" + std::string(200, 'a'), rules_);
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message.find("bytes long"), std::string::npos);
}

TEST_F(ControlSocket, TheBackendSaysWhenNobodyListens) {
  auto r = ctl::SocketBackend(sock()).stats();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure, ctl::Failure::runtime);
  EXPECT_NE(r.value.error().message.find("cannot connect"), std::string::npos);
  EXPECT_NE(r.value.error().message.find("--control " + sock()), std::string::npos);
}

}  // namespace

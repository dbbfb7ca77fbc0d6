// The control socket end to end without a dataplane: the counters' wire text, the reply
// framing, sluiced's ControlServer on a real Unix socket, and sluicectl's SocketBackend
// talking to it (SPEC §1 sluicectl, §4 mode 0600, §6 a malformed request changes nothing).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "control_protocol.hpp"
#include "control_server.hpp"
#include "counters_json.hpp"
#include "counters_wire.hpp"
#include "rules_loader.hpp"
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

TEST(ControlProtocol, RepliesCarryABodyOrOneLineOfError) {
  auto ok = control::read_reply(control::ok_reply("a\nb\n"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "a\nb\n");
  auto err = control::read_reply(control::error_reply("bad\nthing"));
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().message, "bad thing");
  EXPECT_FALSE(control::read_reply(""));
  auto junk = control::read_reply("HTTP/1.1 200 OK\r\n");
  ASSERT_FALSE(junk);
  EXPECT_NE(junk.error().message.find("not a sluiced control reply"), std::string::npos);
}

constexpr const char* kRules = R"(
default: {action: pass}
rules:
  - {name: udp-only, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, action: drop}
  - {name: per-source, match: {proto: tcp, dst-port: 80}, key: src-ip, rate: 2Mbit, burst: 3000B, action: mark-dscp:10}
)";

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
    rules_yaml_ = dump_rules_yaml(*rules);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string sock() const { return (dir_ / "s.sock").string(); }

  // Sends raw bytes (no newline added) and returns everything the server sends back.
  std::string raw_exchange(const std::string& bytes, bool shut_write = true) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, sock().c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
    if (!bytes.empty()) {
      EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
    }
    if (shut_write) shutdown(fd, SHUT_WR);
    std::string reply;
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, size_t(n));
    close(fd);
    return reply;
  }

  fs::path dir_;
  std::string rules_yaml_;
};

TEST_F(ControlSocket, ListensWithMode0600AndRemovesTheSocketWhenDone) {
  {
    auto server = ControlServer::start(sock(), rules_yaml_);
    ASSERT_TRUE(server) << server.error().message;
    struct stat st{};
    ASSERT_EQ(lstat(sock().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  EXPECT_FALSE(fs::exists(sock()));
}

TEST_F(ControlSocket, CreatesAMissingDirectoryPrivateToItsOwner) {
  const std::string path = (dir_ / "run" / "s.sock").string();
  auto server = ControlServer::start(path, rules_yaml_);
  ASSERT_TRUE(server) << server.error().message;
  EXPECT_EQ(fs::status(dir_ / "run").permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(ControlSocket, AnswersStatsOnlyOncePublishedAndThenTheLatestFigures) {
  auto server = ControlServer::start(sock(), rules_yaml_);
  ASSERT_TRUE(server) << server.error().message;
  ctl::SocketBackend backend(sock());
  auto before = backend.stats();
  ASSERT_FALSE(before);
  EXPECT_NE(before.error().message.find("not set up yet"), std::string::npos) << before.error().message;

  CountersSnapshot s = sample_snapshot();
  (*server)->publish(s);
  auto first = backend.stats();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(counters_to_json(*first), counters_to_json(s));
  s.default_rule.traffic.add(Outcome::passed, 64);
  (*server)->publish(s);
  auto second = backend.stats();
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->default_rule.traffic.pkts(Outcome::passed), 2u);
}

TEST_F(ControlSocket, RulesComeBackAsTheSameRuleSet) {
  auto server = ControlServer::start(sock(), rules_yaml_);
  ASSERT_TRUE(server) << server.error().message;
  auto rules = ctl::SocketBackend(sock()).rules();
  ASSERT_TRUE(rules) << rules.error().message;
  ASSERT_EQ(rules->rules.size(), 2u);
  EXPECT_EQ(rules->rules[1].name, "per-source");
  EXPECT_EQ(dump_rules_yaml(*rules), rules_yaml_);
}

TEST_F(ControlSocket, MalformedRequestsGetAnErrorAndTheServerKeepsServing) {
  auto server = ControlServer::start(sock(), rules_yaml_);
  ASSERT_TRUE(server) << server.error().message;
  (*server)->publish(sample_snapshot());
  EXPECT_EQ(raw_exchange("garbage\n").rfind("error unknown request \"garbage\"", 0), 0u);
  EXPECT_EQ(raw_exchange("stats extra\n").rfind("error unknown request", 0), 0u);
  EXPECT_EQ(raw_exchange("\n"), "error empty request\n");
  EXPECT_EQ(raw_exchange(std::string(5000, 'x') + "\n").rfind("error request longer than", 0), 0u);
  EXPECT_EQ(raw_exchange(std::string("st\0ts\n", 6)).rfind("error unknown request", 0), 0u);
  EXPECT_EQ(raw_exchange(""), "error empty request\n");  // connected, said nothing, hung up
  // Without the newline, the end of the stream ends the request; "\r\n" is a newline too.
  EXPECT_EQ(raw_exchange("rules").rfind("ok\n", 0), 0u);
  EXPECT_EQ(raw_exchange("stats\r\n").rfind("ok\nrule per-source ", 0), 0u);
  auto stats = ctl::SocketBackend(sock()).stats();
  EXPECT_TRUE(stats) << stats.error().message;
}

TEST_F(ControlSocket, AClientThatSaysNothingIsCutOffAndOthersAreServedAfterIt) {
  auto server = ControlServer::start(sock(), rules_yaml_);
  ASSERT_TRUE(server) << server.error().message;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(raw_exchange("sta", /*shut_write=*/false), "error no complete request within 1000 ms\n");
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  EXPECT_TRUE(ctl::SocketBackend(sock()).rules());
}

TEST_F(ControlSocket, AClientTricklingItsRequestIsCutOffAtOneDeadline) {
  auto server = ControlServer::start(sock(), rules_yaml_);
  ASSERT_TRUE(server) << server.error().message;
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock().c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const auto start = std::chrono::steady_clock::now();
  // One byte every 300 ms: each wait is shorter than the timeout, the whole is not.
  std::string reply;
  for (int i = 0; i < 20 && reply.empty(); ++i) {
    send(fd, "s", 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    char buf[256];
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) reply.assign(buf, size_t(n));
  }
  close(fd);
  EXPECT_EQ(reply, "error no complete request within 1000 ms\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500));
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
  auto server = ControlServer::start(sock(), rules_yaml_);
  ASSERT_TRUE(server) << server.error().message;
  auto second = ControlServer::start(sock(), rules_yaml_);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("another process"), std::string::npos);
  EXPECT_TRUE(ctl::SocketBackend(sock()).rules()) << "the first server must keep its socket";

  const std::string file = (dir_ / "plain").string();
  std::ofstream(file) << "not a socket";
  auto on_file = ControlServer::start(file, rules_yaml_);
  ASSERT_FALSE(on_file);
  EXPECT_NE(on_file.error().message.find("exists and is not a socket"), std::string::npos);
  EXPECT_TRUE(fs::exists(file));
  auto too_long = ControlServer::start("/tmp/" + std::string(200, 'a'), rules_yaml_);
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message.find("bytes long"), std::string::npos);
}

TEST_F(ControlSocket, TheBackendSaysWhenNobodyListens) {
  auto r = ctl::SocketBackend(sock()).stats();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot connect"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("--control " + sock()), std::string::npos) << r.error().message;
}

}  // namespace

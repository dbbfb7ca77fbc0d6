// The control socket end to end without a dataplane: the counters' wire text, sluiced's
// ControlServer on a real Unix socket speaking protocol v2, and sluicectl's SocketBackend
// talking to it (SPEC §1 sluicectl, §4 mode 0600, §6 a malformed request changes nothing).
// The server under abuse is in control_socket_abuse_test.cpp.
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
#include <fstream>
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

#include "control_socket_fixture.hpp"

using namespace sluice;
using namespace sluice::control_test;

namespace {

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

TEST_F(ControlSocket, CreatesEveryMissingDirectoryOfADeepPath) {
  const std::string path = (dir_ / "run" / "sluice" / "eth0" / "s.sock").string();
  auto server = ControlServer::start(path, rules_);
  ASSERT_TRUE(server) << server.error().message;
  for (const fs::path& d : {dir_ / "run", dir_ / "run" / "sluice", dir_ / "run" / "sluice" / "eth0"})
    EXPECT_EQ(fs::status(d).permissions() & fs::perms::all, fs::perms::owner_all) << d;
  EXPECT_TRUE(fs::is_socket(path));
}

TEST_F(ControlSocket, APathThroughARegularFileIsRefusedWithTheReason) {
  std::ofstream(dir_ / "file") << "x";
  auto server = ControlServer::start((dir_ / "file" / "s.sock").string(), rules_);
  ASSERT_FALSE(server);
  EXPECT_NE(server.error().message.find("Not a directory"), std::string::npos)
      << server.error().message;
}

TEST_F(ControlSocket, AnswersStatsOnlyOncePublishedAndThenTheLatestFigures) {
  auto server = ControlServer::start(sock(), rules_);
  ASSERT_TRUE(server) << server.error().message;
  ctl::SocketBackend backend(sock());
  auto before = backend.stats();
  ASSERT_FALSE(before);
  EXPECT_NE(before.error().message.find("not set up yet"), std::string::npos)
      << before.error().message;

  CountersSnapshot s = sample_snapshot();
  (*server)->publish(s);
  auto first = backend.stats();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(counters_to_json(*first), counters_to_json(s));
  s.default_rule.traffic.add(Outcome::passed, 64);
  (*server)->publish(s);
  auto second = backend.stats();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->default_rule.traffic.pkts(Outcome::passed), 2u);
}

TEST_F(ControlSocket, RulesComeBackAsTheSameRuleSet) {
  auto server = serve();
  auto rules = ctl::SocketBackend(sock()).rules();
  ASSERT_TRUE(rules) << rules.error().message;
  ASSERT_EQ(rules->rules.size(), 2u);
  EXPECT_EQ(rules->rules[1].name, "per-source");
  EXPECT_EQ(dump_rules_yaml(*rules), dump_rules_yaml(rules_));
}

TEST_F(ControlSocket, AServerWithoutATargetYetSaysSluicedIsStarting) {
  auto server = serve();
  auto r = ctl::SocketBackend(sock()).delete_rule("udp-only", {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::runtime);
  EXPECT_NE(r.error().message.find("sluiced is still starting"), std::string::npos)
      << r.error().message;
}

TEST_F(ControlSocket, WritesThroughTheSocketApplyAndStaleOnesConflict) {
  auto target = test::ScriptedRulesTarget::create(rules_);
  ASSERT_TRUE(target);
  auto server = serve({}, target.get());
  ctl::SocketBackend backend(sock());
  auto set = backend.set_rule("udp-only", {{"rate", "2kpps"}}, {});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->generation, 2u);
  // The loop's reply says when the change ran everywhere, counted from the request's read.
  ASSERT_TRUE(set->applied_us.has_value());
  EXPECT_LT(*set->applied_us, 60'000'000u);
  EXPECT_EQ(format_rules_diff(set->diff).substr(0, 32), "~ udp-only: rate (buckets kept)\n");
  auto stale = backend.delete_rule("udp-only", ctl::WriteOptions{1});
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().kind, ErrorKind::runtime);
  EXPECT_NE(stale.error().message.find("rules changed since generation 1 (now 2)"), std::string::npos)
      << stale.error().message;
  auto bad = backend.load_config("rules:\n  - {name: a, rate: x}\n", "new.yaml", {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::invalid_input);
  EXPECT_NE(bad.error().message.find("new.yaml:2"), std::string::npos) << bad.error().message;
  EXPECT_EQ(target->generation(), 2u);
}

TEST_F(ControlSocket, ATargetAttachedAfterTheStartMakesItWritableAndDetachingReadOnly) {
  auto server = serve();  // as sluiced starts it: before the dataplane exists
  ctl::SocketBackend backend(sock());
  EXPECT_EQ(backend.delete_rule("udp-only", {}).error().kind, ErrorKind::runtime);
  auto target = test::ScriptedRulesTarget::create(rules_);
  server->set_target(target.get());
  EXPECT_NE(exchange(sock(), request("hello")).find("\"writable\":true"), std::string::npos);
  auto del = backend.delete_rule("udp-only", {});
  ASSERT_TRUE(del) << del.error().message;
  EXPECT_EQ(target->rules().rules.size(), 1u);
  server->set_target(nullptr);
  auto refused = backend.delete_rule("per-source", {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("rule.del: sluiced is stopping"), std::string::npos)
      << refused.error().message;
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
  EXPECT_EQ(r.error().kind, ErrorKind::runtime);
  EXPECT_NE(r.error().message.find("cannot connect"), std::string::npos);
  EXPECT_NE(r.error().message.find("--control " + sock()), std::string::npos);
}

}  // namespace

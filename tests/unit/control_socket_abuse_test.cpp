// The control server under abuse (issue 13): stalled, trickling, half-sent, idle, over-the-cap,
// oversized, never-reading, slow-to-apply and foreign-uid clients delay no other client and
// change nothing.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pwd.h>
#include <sched.h>
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

#include "control_socket_fixture.hpp"

using namespace sluice;
using namespace sluice::control_test;

namespace {

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
  // One worker thread builds the five 3,000-rule dumps in turn, and each deadline starts
  // when its reply is handed back: under TSan that took longer than 2 s (clean-clone CI of
  // session 27). What is asserted is that they are dropped at all; how long building a reply
  // takes is not this test's business, so the wait is generous.
  for (int i = 0; i < 3000 && server->connections() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server->connections(), 0u) << "clients that never read are dropped at the deadline";
  for (int fd : deaf) close(fd);
}

// A RulesTarget whose apply takes a while (an RCU grace period, a big rule set).
class SlowTarget final : public RulesTarget {
 public:
  explicit SlowTarget(RulesTarget* inner, std::chrono::milliseconds delay = std::chrono::milliseconds(500))
      : inner_(inner), delay_(delay) {}
  RuleSet rules() const override { return inner_->rules(); }
  uint64_t generation() const override { return inner_->generation(); }
  Result<RulesDiff> apply(RuleSet next) override {
    std::this_thread::sleep_for(delay_);
    return inner_->apply(std::move(next));
  }
  Status check(const RuleSet& next) const override { return inner_->check(next); }
  Result<std::vector<FlowRate>> top_flows(const TopFlowsQuery& q) override { return inner_->top_flows(q); }

 private:
  RulesTarget* inner_;
  std::chrono::milliseconds delay_;
};

TEST_F(ControlSocket, AWriteBeingAppliedDelaysNoRead) {
  auto inner = test::ScriptedRulesTarget::create(rules_);
  SlowTarget slow(inner.get());
  auto server = serve({}, &slow);
  std::thread writer([&] {
    for (int i = 0; i < 3; ++i) {
      auto r = ctl::SocketBackend(sock()).set_rule("udp-only", {{"burst", std::to_string(20 + i)}}, {});
      EXPECT_TRUE(r) << r.error().message;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  expect_prompt(stats_latencies(sock(), 20));
  writer.join();
  EXPECT_EQ(inner->generation(), 4u);
}

// The worker thread sends a write's reply itself and hands the connection back without waking
// the loop, unless the loop holds more of that connection's requests: then nothing else would
// wake it before its 20 ms tick, and 100 pipelined writes would take ~2 s.
TEST_F(ControlSocket, PipelinedWritesAreAnsweredAtOnceAndInOrder) {
  auto target = test::ScriptedRulesTarget::create(rules_);
  auto server = serve({}, target.get());
  const int fd = connect_to(sock());
  ASSERT_GE(fd, 0);
  constexpr int kWrites = 100;
  std::string frames;
  for (int i = 1; i <= kWrites; ++i)
    frames += wire::encode_frame("{\"version\":2,\"id\":" + std::to_string(i) +
                                 ",\"op\":\"rule.set\",\"name\":\"udp-only\",\"fields\":{\"burst\":\"" +
                                 std::to_string(10 + i) + "\"}}");
  const auto start = Clock::now();
  send_bytes(fd, frames);
  wire::FrameReader reader;
  for (int i = 1; i <= kWrites; ++i) {
    const std::string reply = read_reply(fd, reader);
    ASSERT_NE(reply.find("\"id\":" + std::to_string(i) + ",\"ok\":true"), std::string::npos)
        << "reply " << i << ": " << reply;
  }
  EXPECT_LT(ms_since(start), 500.0) << kWrites << " pipelined writes";
  close(fd);
  EXPECT_EQ(target->generation(), uint64_t(kWrites) + 1);
}

// A request that arrives while the worker thread has the connection (its write is being
// applied) cannot be read until the write's Done: the loop asks for a wake-up with it, or the
// request would wait for the loop's next tick (up to 20 ms; half that on average).
TEST_F(ControlSocket, ARequestSentDuringAWriteIsAnsweredRightAfterIt) {
  auto inner = test::ScriptedRulesTarget::create(rules_);
  SlowTarget slow(inner.get(), std::chrono::milliseconds(3));
  auto server = serve({}, &slow);
  const int fd = connect_to(sock());
  ASSERT_GE(fd, 0);
  wire::FrameReader reader;
  std::vector<double> gaps_ms;
  for (int i = 0; i < 30; ++i) {
    send_bytes(fd, wire::encode_frame("{\"version\":2,\"id\":1,\"op\":\"rule.set\",\"name\":"
                                      "\"udp-only\",\"fields\":{\"burst\":\"" +
                                      std::to_string(20 + i) + "\"}}"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the write is being applied
    send_bytes(fd, request("hello", 2));
    ASSERT_NE(read_reply(fd, reader).find("\"id\":1,\"ok\":true"), std::string::npos);
    const auto first = Clock::now();
    ASSERT_NE(read_reply(fd, reader).find("\"id\":2,\"ok\":true"), std::string::npos);
    gaps_ms.push_back(ms_since(first));
  }
  close(fd);
  std::sort(gaps_ms.begin(), gaps_ms.end());
  EXPECT_LT(gaps_ms[15], 5.0) << "median gap between the write's reply and the next, max "
                              << gaps_ms.back() << " ms";
  EXPECT_EQ(inner->generation(), 31u);
}

// A client that hangs up while its write is applied: the write still applies, the server
// keeps the descriptor until the worker thread is done with it, and a client that connects
// meanwhile (and may be given the same descriptor number if it were closed) never receives
// the gone client's reply.
TEST_F(ControlSocket, AClientGoneDuringItsWriteGetsNoOneElseItsReply) {
  auto inner = test::ScriptedRulesTarget::create(rules_);
  SlowTarget slow(inner.get());
  auto server = serve({}, &slow);
  const int gone = connect_to(sock());
  ASSERT_GE(gone, 0);
  send_bytes(gone, wire::encode_frame(
                       "{\"version\":2,\"id\":41,\"op\":\"rule.set\",\"name\":\"udp-only\","
                       "\"fields\":{\"burst\":\"33\"}}"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the write is under way
  close(gone);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the loop saw the hang-up
  const int next = connect_to(sock());
  ASSERT_GE(next, 0);
  wire::FrameReader reader;
  send_bytes(next, request("hello", 7));
  EXPECT_NE(read_reply(next, reader).find("\"id\":7,\"ok\":true"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the slow apply is over
  send_bytes(next, request("hello", 8));
  const std::string reply = read_reply(next, reader);
  EXPECT_NE(reply.find("\"id\":8,\"ok\":true"), std::string::npos) << reply;
  close(next);
  EXPECT_EQ(inner->generation(), 2u);
  for (int i = 0; i < 100 && server->connections() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server->connections(), 0u);
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

}  // namespace

namespace sluice::control_test {
namespace {

// Threads of this process running SCHED_FIFO now.
int fifo_threads() {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
    if (sched_getscheduler(std::stoi(task.path().filename().string())) == SCHED_FIFO) ++n;
  return n;
}

}  // namespace

// ControlLimits::rt_priority: both threads of the loop ask for SCHED_FIFO (granted to root,
// which runs these tests; otherwise they fall back to nice and still serve), and the loop
// times each request it hands to its worker thread, in order: taken <= built <= sent.
TEST_F(ControlSocket, RtPriorityThreadsServeAndRequestsAreTimed) {
  const int before = fifo_threads();
  ControlLimits limits;
  limits.rt_priority = 1;
  limits.thread_nice = -10;
  auto server = serve(limits);
  const std::string hello = exchange(sock(), request("hello", 1));
  EXPECT_NE(hello.find("\"ok\":true"), std::string::npos) << hello;
  if (geteuid() == 0) {
    // The worker thread raises its own priority when it starts, which may be after the loop
    // answered hello (seen under ASan with other suites running): wait for it, up to 3 s.
    const auto fifo_deadline = Clock::now() + std::chrono::seconds(3);
    while (fifo_threads() - before < 2 && Clock::now() < fifo_deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(fifo_threads() - before, 2);
  }
  EXPECT_TRUE(server->request_timings().empty()) << "hello is answered on the loop";
  const std::string rules = exchange(sock(), request("rules", 2));
  EXPECT_NE(rules.find("\"ok\":true"), std::string::npos) << rules;
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (server->request_timings().empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t = server->request_timings();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_LE(t[0].queued_ns, t[0].executed_ns);
  EXPECT_LE(t[0].executed_ns, t[0].replied_ns);
  EXPECT_LT(t[0].replied_ns, 3'000'000'000ull);
}

}  // namespace sluice::control_test

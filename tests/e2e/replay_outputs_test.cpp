// End-to-end `sluiced --replay` (and live mode's --report check): outputs never replace an
// input, each other, a device node or a symbolic link. Device nodes are our own (mknod in the
// test's directory, root only), never the real /dev/null.
#include <poll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <thread>

#include "replay_common.hpp"

namespace sluice::testing {
namespace {

// All a FIFO's writers write until they close it, or 20 s pass (so a sluiced that never
// writes it fails the test instead of hanging it).
std::string read_fifo(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK);
  std::string got;
  if (fd < 0) return got;
  bool had_writer = false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      had_writer = true;
      got.append(buf, size_t(n));
    } else if (n == 0 && had_writer) {
      break;  // the writer closed it
    } else if (n == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // no writer yet
    }
  }
  close(fd);
  return got;
}

class ReplayOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    r_.set_rules(policer_rules("token-bucket", "10pps", "5", "drop"));
    r_.set_input({Frame{kT0, udp4(0)}, Frame{kT0 + 1, udp4(1)}});
    capture_ = read_file(r_.in());
    rules_ = read_file(r_.rules());
  }
  ProcessResult run(const std::string& out, const std::string& report) {
    return run_process({env_or_die("SLUICED"), "--replay", r_.in(), "--out", out, "--report",
                        report, "--config", r_.rules()},
                       r_.dir());
  }
  // Exit 2, both paths named, and the inputs as they were.
  void expect_refused(const ProcessResult& p, const std::string& a, const std::string& b) {
    EXPECT_EQ(p.exit_code, 2) << p.err;
    EXPECT_NE(p.err.find(a), std::string::npos) << p.err;
    EXPECT_NE(p.err.find(b), std::string::npos) << p.err;
    EXPECT_EQ(read_file(r_.in()), capture_);
    EXPECT_EQ(read_file(r_.rules()), rules_);
  }
  Replay r_;
  std::string capture_, rules_;
};

TEST_F(ReplayOutputs, OutThatIsTheInputIsRefused) {
  expect_refused(run(r_.in(), r_.report()), "--out " + r_.in(), "--replay " + r_.in());
  EXPECT_FALSE(std::filesystem::exists(r_.report()));
}

TEST_F(ReplayOutputs, ReportThatIsTheRulesFileIsRefused) {
  expect_refused(run(r_.out(), r_.rules()), "--report " + r_.rules(), "--config " + r_.rules());
  EXPECT_FALSE(std::filesystem::exists(r_.out()));
}

TEST_F(ReplayOutputs, OutAndReportOnOneFileAreRefused) {
  const std::string spelt_again = r_.dir().path() + "/./x";
  expect_refused(run(r_.dir().file("x"), spelt_again), "--out " + r_.dir().file("x"),
                 "--report " + spelt_again);
  EXPECT_FALSE(std::filesystem::exists(r_.dir().file("x")));
}

TEST_F(ReplayOutputs, ADeviceNodeStaysADevice) {
  const std::string dev = r_.dir().file("null");
  if (geteuid() != 0 || mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "needs root for mknod";
  ProcessResult p = run(dev, dev);  // both to one device: allowed, nothing is lost
  ASSERT_EQ(p.exit_code, 0) << p.err;
  struct stat st{};
  ASSERT_EQ(lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
}

TEST_F(ReplayOutputs, AFifoGetsThePcapInPlace) {
  const std::string fifo = r_.dir().file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_fifo(fifo); });
  ProcessResult p = run(fifo, r_.report());
  reader.join();
  ASSERT_EQ(p.exit_code, 0) << p.err;
  ASSERT_GE(got.size(), 24u);
  EXPECT_EQ(got.substr(0, 4), std::string("\x4d\x3c\xb2\xa1", 4));  // nanosecond pcap, LE
  struct stat st{};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(r_.rule("limit").u64("matched_packets"), 2u);
}

TEST_F(ReplayOutputs, ASymlinkAtAnOutputIsRefusedAndItsTargetKept) {
  write_file(r_.dir().file("victim"), "precious");
  ASSERT_EQ(symlink(r_.dir().file("victim").c_str(), r_.report().c_str()), 0);
  ProcessResult p = run(r_.out(), r_.report());
  EXPECT_EQ(p.exit_code, 2) << p.err;
  EXPECT_NE(p.err.find("--report " + r_.report() + ": is a symbolic link"), std::string::npos) << p.err;
  EXPECT_EQ(read_file(r_.dir().file("victim")), "precious");
  EXPECT_TRUE(std::filesystem::is_symlink(r_.report()));
  EXPECT_FALSE(std::filesystem::exists(r_.out()));
}

TEST_F(ReplayOutputs, ALiveReportThatIsTheRulesFileIsRefusedBeforeEal) {
  ProcessResult p = run_process({env_or_die("SLUICED"), "--", "--config", r_.rules(), "--report",
                                 r_.rules()},
                                r_.dir());
  EXPECT_EQ(p.exit_code, 2) << p.err;
  if (p.err.find("built without DPDK") != std::string::npos) return;
  EXPECT_NE(p.err.find("--report " + r_.rules() + " is the same file as --config"),
            std::string::npos)
      << p.err;
  EXPECT_EQ(read_file(r_.rules()), rules_);
}

}  // namespace
}  // namespace sluice::testing

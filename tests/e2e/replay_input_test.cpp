// End-to-end `sluiced --replay`: input formats, bad input and usage (SPEC §1, §6).
#include "replay_common.hpp"

namespace sluice::testing {
namespace {

// ------------------------------------------------------------------ input formats

TEST(ReplayInput, MicrosecondPcapTimestampsAreScaledToNanoseconds) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "1000pps", "100", "drop"));
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);  // classic microsecond pcap
  pcap_dumper_t* d = pcap_dump_open(dead, r.in().c_str());
  ASSERT_NE(d, nullptr);
  for (uint32_t i = 0; i < 5; ++i) {
    auto f = udp4(i);
    pcap_pkthdr h{};
    h.ts.tv_sec = 1700000000;
    h.ts.tv_usec = 123456 + i;
    h.caplen = h.len = uint32_t(f.size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
  run_ok(r);
  auto out = r.output();
  ASSERT_EQ(out.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i)
    EXPECT_EQ(out[i].ts_ns, 1700000000ull * kNsPerSecond + (123456 + i) * kNsPerUs);
}

// A minimal little-endian pcapng file: section header, one Ethernet interface with
// nanosecond timestamps (if_tsresol = 9), and one enhanced packet block per frame.
std::string pcapng_of(const std::vector<Frame>& frames) {
  std::string out;
  auto u16 = [&](uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); };
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  u32(0x0A0D0D0A), u32(28), u32(0x1A2B3C4D), u16(1), u16(0), u32(0xffffffff), u32(0xffffffff), u32(28);
  u32(1), u32(32), u16(1), u16(0), u32(65535);
  u16(9), u16(1), u32(9);  // if_tsresol: 10^-9, padded to 4 bytes
  u16(0), u16(0);          // opt_endofopt
  u32(32);
  for (const Frame& f : frames) {
    uint32_t padded = uint32_t((f.bytes.size() + 3) & ~size_t(3));
    uint32_t total = 32 + padded;
    u32(6), u32(total), u32(0), u32(uint32_t(f.ts_ns >> 32)), u32(uint32_t(f.ts_ns));
    u32(uint32_t(f.bytes.size())), u32(uint32_t(f.bytes.size()));
    out.append(reinterpret_cast<const char*>(f.bytes.data()), f.bytes.size());
    out.append(padded - f.bytes.size(), '\0');
    u32(total);
  }
  return out;
}

TEST(ReplayInput, PcapngIsRead) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "10pps", "3", "drop"));
  std::vector<Frame> trace;
  add_run(trace, kT0 + 7, kNsPerUs, 6, [](uint32_t s) { return udp4(s); });
  write_file(r.in(), pcapng_of(trace));
  run_ok(r);
  auto out = r.output();
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].ts_ns, trace[i].ts_ns);
    EXPECT_EQ(out[i].bytes, trace[i].bytes);
  }
}

// Out-of-order capture timestamps are not an input error: the core handles clock steps
// (SPEC §3). A step back of more than the fill time B/r plus the core's stale-read tolerance
// (SL_STEP_TOLERANCE_NS, 1 s) re-bases a bucket as empty: it must refill within B/r instead
// of stalling until the clock catches up again. (Smaller steps read as fewer tokens.)
TEST(ReplayInput, TimestampsGoingBackwardsAreAccepted) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "1000pps", "100", "drop"));  // B/r = 100 ms
  std::vector<Frame> trace;
  add_run(trace, kT0 + 5 * kNsPerSecond, kNsPerMs, 10, [](uint32_t s) { return udp4(s); });
  // The clock steps back 5 s, then 300 packets at exactly the rate.
  add_run(trace, kT0, kNsPerMs, 300, [](uint32_t s) { return udp4(s); });
  r.set_input(trace);
  run_ok(r);
  auto out = r.output();
  for (const Frame& f : out) EXPECT_EQ(f.ts_ns, trace[seq_of(f.bytes)].ts_ns);
  uint64_t after_step = 0;
  for (const Frame& f : out) after_step += seq_of(f.bytes) >= 10;
  EXPECT_GE(after_step, 300u - 100u - 1u) << "the bucket stalled after the clock stepped back";
}

// ------------------------------------------------------------------ bad input (§1, §6)

class ReplayBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    r_.set_rules(policer_rules("token-bucket", "10pps", "5", "drop"));
    std::vector<Frame> trace;
    add_run(trace, kT0, kNsPerMs, 10, [](uint32_t s) { return udp4(s); });
    r_.set_input(trace);
  }
  // Exit 2, the named file in the message, and no output left behind.
  void expect_rejected(const std::string& named, const std::string& also = "") {
    ProcessResult p = r_.run();
    EXPECT_EQ(p.exit_code, 2) << p.err;
    EXPECT_NE(p.err.find(named), std::string::npos) << "stderr does not name " << named << ": " << p.err;
    if (!also.empty()) { EXPECT_NE(p.err.find(also), std::string::npos) << p.err; }
    EXPECT_FALSE(std::filesystem::exists(r_.out()));
    EXPECT_FALSE(std::filesystem::exists(r_.report()));
    for (const auto& e : std::filesystem::directory_iterator(r_.dir().path()))
      EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
  }
  Replay r_;
};

TEST_F(ReplayBadInput, MissingPcap) {
  std::filesystem::remove(r_.in());
  expect_rejected(r_.in());
}

TEST_F(ReplayBadInput, GarbagePcap) {
  write_file(r_.in(), "this is not a capture file, just some text that is long enough\n");
  expect_rejected(r_.in());
}

TEST_F(ReplayBadInput, EmptyPcap) {
  write_file(r_.in(), "");
  expect_rejected(r_.in());
}

TEST_F(ReplayBadInput, TruncatedRecord) {
  std::string bytes = read_file(r_.in());
  write_file(r_.in(), bytes.substr(0, bytes.size() - 30));
  expect_rejected(r_.in(), "record 10");
}

TEST_F(ReplayBadInput, NotEthernet) {
  pcap_t* dead = pcap_open_dead(DLT_RAW, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, r_.in().c_str());
  ASSERT_NE(d, nullptr);
  pcap_dump_close(d);
  pcap_close(dead);
  expect_rejected(r_.in(), "Ethernet");
}

TEST_F(ReplayBadInput, MalformedRules) {
  r_.set_rules("default: {action: pass}\nrules:\n  - name: x\n    match: {proto: udp}\n"
               "    rate: 10pps\n    burst: 5\n    colour: purple\n");
  expect_rejected(r_.rules() + ":7");
}

TEST_F(ReplayBadInput, ZeroRate) {
  r_.set_rules(policer_rules("token-bucket", "0pps", "5", "drop"));
  expect_rejected(r_.rules() + ":");
}

TEST_F(ReplayBadInput, MissingRules) {
  std::filesystem::remove(r_.rules());
  expect_rejected(r_.rules());
}

TEST_F(ReplayBadInput, FailedRunKeepsThePreviousOutputs) {
  write_file(r_.out(), "previous");
  write_file(r_.in(), "garbage garbage garbage garbage");
  ProcessResult p = r_.run();
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(read_file(r_.out()), "previous");
}

TEST(ReplayUsage, MissingOptionsAndMissingRulesAreUsageErrors) {
  TempDir dir;
  std::string sluiced = env_or_die("SLUICED");
  ProcessResult p = run_process({sluiced, "--replay", dir.file("in.pcap"), "--out", dir.file("o")}, dir);
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("--report"), std::string::npos) << p.err;
  p = run_process({sluiced, "--replay", "a", "--out", "b", "--report", "c", "--config", "d", "--bogus"}, dir);
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("--bogus"), std::string::npos) << p.err;
  p = run_process({sluiced}, dir);
  EXPECT_EQ(p.exit_code, 2);
  // Live mode checks its rules file before it starts EAL: a missing one is bad input. A
  // build without DPDK refuses live mode first, also as a usage error.
  p = run_process({sluiced, "--", "--config", "rules.yaml"}, dir);
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_TRUE(p.err.find("rules.yaml: cannot open") != std::string::npos ||
              p.err.find("built without DPDK") != std::string::npos)
      << p.err;
  p = run_process({sluiced, "--help"}, dir);
  EXPECT_EQ(p.exit_code, 0);
}

TEST(ReplayUsage, UnwritableOutputIsARuntimeFailure) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "10pps", "5", "drop"));
  r.set_input({Frame{kT0, udp4(0)}});
  std::string sluiced = env_or_die("SLUICED");
  ProcessResult p = run_process({sluiced, "--replay", r.in(), "--out", r.dir().file("no/such/dir/o.pcap"),
                                 "--report", r.report(), "--config", r.rules()},
                                r.dir());
  EXPECT_EQ(p.exit_code, 1) << p.err;
  EXPECT_NE(p.err.find("no/such/dir/o.pcap"), std::string::npos) << p.err;
  EXPECT_FALSE(std::filesystem::exists(r.report()));
}

}  // namespace
}  // namespace sluice::testing

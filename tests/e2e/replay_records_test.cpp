// End-to-end `sluiced --replay`, record by record: frames are charged by their wire length
// (jumbo frames too), a record the capture cut short (caplen < len) is a truncated frame
// (SPEC §6), and a record whose timestamp fraction is a second or more, or a file of another
// link type, is a malformed capture named as the file says.
#include "replay_common.hpp"

namespace sluice::testing {
namespace {

struct Record {
  uint64_t ts_ns;
  std::vector<uint8_t> bytes;  // what is captured
  uint32_t wire_len;           // len
};

// A nanosecond pcap of records whose caplen and len the test chooses.
void write_records(const std::string& path, const std::vector<Record>& records) {
  pcap_t* dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 262144, PCAP_TSTAMP_PRECISION_NANO);
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  ASSERT_NE(d, nullptr);
  for (const Record& r : records) {
    pcap_pkthdr h{};
    h.ts.tv_sec = time_t(r.ts_ns / kNsPerSecond);
    h.ts.tv_usec = suseconds_t(r.ts_ns % kNsPerSecond);
    h.caplen = uint32_t(r.bytes.size());
    h.len = r.wire_len;
    pcap_dump(reinterpret_cast<u_char*>(d), &h, r.bytes.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
}

TEST(ReplayRecords, JumboFramesAreChargedWhole) {
  // The figures: 1,000 UDP frames of 8,000 bytes at 1 kbit/s with a 100,000-byte
  // burst: 12 fit, and 1 s of trace refills 125 bytes, not a frame.
  Replay r;
  r.set_rules(policer_rules("token-bucket", "1kbit", "100000", "drop"));
  std::vector<Frame> trace;
  for (uint32_t i = 0; i < 1000; ++i)
    trace.push_back(Frame{kT0 + i * kNsPerMs, udp4(i, {.size = 8000})});
  r.set_input(trace);
  run_ok(r);
  const Json limit = r.rule("limit");
  EXPECT_EQ(limit.u64("matched_bytes"), 8'000'000u);
  EXPECT_EQ(limit.u64("passed_packets"), 12u);
  EXPECT_EQ(limit.u64("dropped_packets"), 988u);
  EXPECT_EQ(r.rule("default").u64("malformed_packets"), 0u);
  EXPECT_EQ(r.report_json().at("ports").items.at(0).u64("tx_bytes"), 12u * 8000u);
}

TEST(ReplayRecords, ARecordCutShortIsATruncatedFrameChargedAtItsWireLength) {
  Replay r;
  r.set_rules(policer_rules("token-bucket", "1000pps", "100", "drop"));
  const auto whole = udp4(0, {.size = 1000});
  std::vector<Record> records = {
      {kT0, whole, 1000},                                                  // whole: the rule
      {kT0 + 1, std::vector<uint8_t>(whole.begin(), whole.begin() + 96), 1000},  // snapped
      {kT0 + 2, std::vector<uint8_t>(whole.begin(), whole.begin() + 10), 1000},  // inside Ethernet
  };
  write_records(r.in(), records);
  run_ok(r);
  const Json limit = r.rule("limit"), def = r.rule("default");
  EXPECT_EQ(limit.u64("matched_packets"), 1u);
  EXPECT_EQ(limit.u64("matched_bytes"), 1000u);
  EXPECT_EQ(def.u64("matched_packets"), 2u);
  EXPECT_EQ(def.u64("malformed_packets"), 2u);
  EXPECT_EQ(def.u64("malformed_bytes"), 2000u);
  EXPECT_EQ(def.u64("passed_packets"), 2u);
  // Out as they came in: the captured bytes, the wire length kept.
  auto out = PcapReader::open(r.out());
  ASSERT_TRUE(out) << out.error().message;
  PcapPacket p;
  for (const Record& want : records) {
    auto more = (*out)->next(&p);
    ASSERT_TRUE(more && *more);
    EXPECT_EQ(p.data, want.bytes);
    EXPECT_EQ(p.wire_len, want.wire_len);
  }
  const Json port = r.report_json().at("ports").items.at(0);
  EXPECT_EQ(port.u64("rx_bytes"), 3000u);
  EXPECT_EQ(port.u64("tx_bytes"), 3000u);
}

// A classic pcap written byte by byte: little-endian, `magic` (microseconds 0xa1b2c3d4 or
// nanoseconds 0xa1b23c4d), Ethernet, one 60-byte record per fraction given.
std::string classic_pcap(uint32_t magic, uint32_t link, const std::vector<uint32_t>& fractions) {
  std::string out;
  auto u16 = [&](uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); };
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  u32(magic), u16(2), u16(4), u32(0), u32(0), u32(65535), u32(link);
  const auto f = udp4(0, {.size = 60});
  for (uint32_t frac : fractions) {
    u32(1700000000), u32(frac), u32(uint32_t(f.size())), u32(uint32_t(f.size()));
    out.append(reinterpret_cast<const char*>(f.data()), f.size());
  }
  return out;
}

class ReplayBadRecord : public ::testing::Test {
 protected:
  void SetUp() override { r_.set_rules(policer_rules("token-bucket", "10pps", "5", "drop")); }
  void expect_rejected(const std::string& what) {
    ProcessResult p = r_.run();
    EXPECT_EQ(p.exit_code, 2) << p.err;
    EXPECT_NE(p.err.find(r_.in()), std::string::npos) << p.err;
    EXPECT_NE(p.err.find(what), std::string::npos) << p.err;
    EXPECT_FALSE(std::filesystem::exists(r_.out()));
    EXPECT_FALSE(std::filesystem::exists(r_.report()));
  }
  Replay r_;
};

TEST_F(ReplayBadRecord, MicrosecondFieldOfASecondOrMore) {
  write_file(r_.in(), classic_pcap(0xa1b2c3d4, 1, {999999, 0, 1000000}));
  expect_rejected("record 3: timestamp microsecond field 1000000 is not below 1000000");
  write_file(r_.in(), classic_pcap(0xa1b2c3d4, 1, {999999}));
  run_ok(r_);
}

TEST_F(ReplayBadRecord, NanosecondFieldOfASecondOrMore) {
  write_file(r_.in(), classic_pcap(0xa1b23c4d, 1, {999999999, 1000000000}));
  expect_rejected("record 2: timestamp nanosecond field 1000000000 is not below 1000000000");
  write_file(r_.in(), classic_pcap(0xa1b23c4d, 1, {999999999}));
  run_ok(r_);
}

TEST_F(ReplayBadRecord, LinkTypeIsTheNumberTheFileSays) {
  write_file(r_.in(), classic_pcap(0xa1b2c3d4, 101, {0}));  // LINKTYPE_RAW (libpcap: DLT_RAW 12)
  expect_rejected("link type 101 (RAW) is not supported");
  write_file(r_.in(), classic_pcap(0xa1b2c3d4, 113, {0}));  // LINKTYPE_LINUX_SLL
  expect_rejected("link type 113 (LINUX_SLL) is not supported");
}

}  // namespace
}  // namespace sluice::testing

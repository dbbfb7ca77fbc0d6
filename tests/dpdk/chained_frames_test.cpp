// Multi-segment frames (mbuf chains) through the live worker: classified by their headers and
// charged by their whole length (rte_pktmbuf_pkt_len), also when the first segment is shorter
// than the Ethernet + IP + UDP headers; a DSCP mark on headers gathered from several segments
// lands in the segments; the chains leave whole. BurstFrames (the worker's view of a burst)
// is also tested on its own, for an IPv6 extension chain longer than its first gather.
#include <rte_mbuf.h>

#include <gtest/gtest.h>

#include <numeric>

#include "eal_env.hpp"
#include "frame.hpp"
#include "live/burst_frames.hpp"
#include "live/dataplane.hpp"
#include "live/mempool.hpp"
#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using testing::RingPort;
using testing::wait_until;
using Bytes = std::vector<uint8_t>;

auto* const kEalEnv = ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment);

// `frame` split over a chain of segments of the given sizes, then of full mbufs for the rest.
rte_mbuf* make_chain(rte_mempool* pool, const Bytes& frame, std::vector<uint16_t> sizes) {
  size_t given = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  for (; given < frame.size(); given += sizes.back())
    sizes.push_back(uint16_t(std::min<size_t>(frame.size() - given, RTE_MBUF_DEFAULT_DATAROOM)));
  rte_mbuf* head = nullptr;
  size_t off = 0;
  for (uint16_t size : sizes) {
    rte_mbuf* seg = rte_pktmbuf_alloc(pool);
    if (seg == nullptr) throw std::runtime_error("pool empty");
    char* data = rte_pktmbuf_append(seg, size);
    if (data == nullptr) throw std::runtime_error("segment larger than an mbuf");
    std::memcpy(data, frame.data() + off, size);
    off += size;
    if (head == nullptr) {
      head = seg;
    } else if (rte_pktmbuf_chain(head, seg) != 0) {
      throw std::runtime_error("chain too long");
    }
  }
  return head;
}

// The whole frame an mbuf (chain) holds.
Bytes linear(const rte_mbuf* m) {
  Bytes out(rte_pktmbuf_pkt_len(m));
  const void* p = rte_pktmbuf_read(m, 0, uint32_t(out.size()), out.data());
  if (p != out.data()) std::memcpy(out.data(), p, out.size());
  return out;
}

Bytes udp_frame(uint16_t dport, size_t size) {
  return PacketBuilder().ipv4("10.0.0.1", "192.0.2.10").udp(1024, dport).frame_size(size).build();
}

std::unique_ptr<Pipeline> make_pipeline(const std::string& yaml) {
  auto rules = load_rules_text(yaml, "test.yaml");
  if (!rules) throw std::runtime_error(rules.error().message);
  PipelineOptions opts;
  opts.hash_seed = 1;
  auto p = Pipeline::create(std::move(rules).value(), opts);
  if (!p) throw std::runtime_error(p.error().message);
  return std::move(p).value();
}

class ChainedFrames : public ::testing::Test {
 protected:
  void SetUp() override { SLUICE_REQUIRE_EAL(); }
  void TearDown() override {
    if (dp) dp->stop();
    for (auto& p : ports) p->free_all();
    testing::free_all(received);
    if (dp) {
      EXPECT_EQ(dp->mbufs_in_use(), 0u) << "mbufs leaked";
    }
    dp.reset();
    ports.clear();
  }

  void start(const std::string& yaml) {
    ports.push_back(std::make_unique<RingPort>(1));
    ports.push_back(std::make_unique<RingPort>(1));
    pipeline = make_pipeline(yaml);
    DataplaneConfig c;
    c.ports = {ports[0]->id(), ports[1]->id()};
    c.worker_lcores = {1};
    c.rx_desc = c.tx_desc = 256;
    c.tx_buffer_capacity = 256;
    c.wheel_capacity = 1024;
    c.mempool_cache = 32;
    auto created = Dataplane::create(*pipeline, c);
    ASSERT_TRUE(created) << created.error().message;
    dp = std::move(created).value();
    ASSERT_TRUE(dp->start());
  }

  void inject(const Bytes& frame, const std::vector<uint16_t>& sizes) {
    ASSERT_TRUE(ports[0]->inject(0, make_chain(dp->mempool(), frame, sizes)));
  }

  size_t collect(size_t n) {
    wait_until([&] { ports[1]->collect(received); return received.size() >= n; });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ports[1]->collect(received);
    return received.size();
  }

  std::unique_ptr<Pipeline> pipeline;
  std::vector<std::unique_ptr<RingPort>> ports;
  std::unique_ptr<Dataplane> dp;
  std::vector<rte_mbuf*> received;
};

TEST_F(ChainedFrames, AreClassifiedAndChargedByTheirWholeLength) {
  // A byte rate that refills nothing during the test: the 10000-byte burst admits exactly the
  // frames whose wire lengths fit it, in order.
  start(R"(
default: {action: pass}
rules:
  - {name: dns, match: {proto: udp, dst-port: 53}, key: none, rate: 1kbit, burst: 10000,
     action: drop}
)");
  const Bytes big = udp_frame(53, 3000);
  // First segment 14 bytes (Ethernet only), 30 (inside the IPv4 header), 42 (exactly the
  // headers), 1500 (all headers), and a chain of many small segments.
  const std::vector<std::vector<uint16_t>> splits = {
      {14, 1000}, {30, 12, 100}, {42}, {1500, 1000}, {8, 8, 8, 8, 8, 8, 8, 8, 8, 8}};
  for (const auto& sizes : splits) inject(big, sizes);  // 3 x 3000 fit the burst, then 2 dropped
  inject(udp_frame(999, 2500), {20, 20});                // default, not malformed

  ASSERT_EQ(collect(4), 4u);
  dp->stop();
  const CountersSnapshot s = dp->snapshot();
  const TrafficCounters& dns = s.rules.at(0).traffic;
  EXPECT_EQ(dns.pkts(Outcome::matched), 5u);
  EXPECT_EQ(dns.byts(Outcome::matched), 5u * 3000u);
  EXPECT_EQ(dns.pkts(Outcome::passed), 3u);
  EXPECT_EQ(dns.pkts(Outcome::dropped), 2u);
  EXPECT_EQ(dns.byts(Outcome::dropped), 2u * 3000u);
  const TrafficCounters& def = s.default_rule.traffic;
  EXPECT_EQ(def.pkts(Outcome::matched), 1u);
  EXPECT_EQ(def.byts(Outcome::matched), 2500u);
  EXPECT_EQ(def.pkts(Outcome::malformed), 0u);
  // What left is what came in, byte for byte, still chained.
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(received[i]->nb_segs, 1u);
    EXPECT_EQ(linear(received[i]), big) << i;
  }
  EXPECT_EQ(linear(received[3]), udp_frame(999, 2500));
}

TEST_F(ChainedFrames, DscpMarkOnGatheredHeadersLandsInTheSegments) {
  start(R"(
default: {action: pass}
rules:
  - {name: web, match: {proto: tcp, dst-port: 80}, key: none, rate: 0.001pps, burst: 1,
     action: "mark-dscp:EF"}
)");
  const Bytes frame =
      PacketBuilder().ipv4("10.0.0.2", "192.0.2.1", 8).tcp(999, 80).frame_size(2000).build();
  inject(frame, {});                 // one segment: conforms, passes unmarked
  inject(frame, {10, 10, 10, 100});  // IPv4 header over three segments: marked via the copy
  inject(frame, {500});              // headers in the first segment: marked in place
  ASSERT_EQ(collect(3), 3u);
  EXPECT_EQ(linear(received[0]), frame);
  for (size_t i = 1; i < 3; ++i) {
    const Bytes got = linear(received[i]);
    const ParsedFrame pf = parse_frame(got.data(), uint32_t(got.size()));
    EXPECT_EQ(pf.dscp, 46) << i;
    // A valid header checksum after the rewrite: the sum over the header is 0xffff.
    EXPECT_EQ(PacketBuilder::ipv4_checksum(got.data() + 14, 20), 0) << i;
    // Nothing but the TOS byte and the checksum changed.
    Bytes expected = frame;
    expected[15] = got[15];
    expected[24] = got[24];
    expected[25] = got[25];
    EXPECT_EQ(got, expected) << i;
    EXPECT_EQ(got[15] >> 2, 46) << i;
  }
  dp->stop();
  EXPECT_EQ(dp->snapshot().rules.at(0).traffic.pkts(Outcome::marked), 2u);
}

class BurstFramesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_EAL();
    auto p = Mempool::create("bf" + std::to_string(getpid()), 255, RTE_MBUF_DEFAULT_BUF_SIZE, 0,
                             SOCKET_ID_ANY);
    ASSERT_TRUE(p) << p.error().message;
    pool = std::move(p).value();
  }
  void TearDown() override {
    for (rte_mbuf* m : held) rte_pktmbuf_free(m);
    EXPECT_EQ(pool.in_use(), 0u);
  }
  rte_mbuf* chain(const Bytes& f, std::vector<uint16_t> sizes) {
    held.push_back(make_chain(pool.get(), f, std::move(sizes)));
    return held.back();
  }
  Mempool pool;
  std::vector<rte_mbuf*> held;
};

TEST_F(BurstFramesTest, GathersAsMuchAsTheHeadersNeedAndParsesLikeTheWholeFrame) {
  // IPv6 with 2048 + 2048 + 8 bytes of extension headers: past the first gather (256) and past
  // a first segment of 2048, so gathered in growing steps up to the UDP header.
  const Bytes v6 = PacketBuilder()
                       .ipv6("2001:db8::1", "2001:db8::2")
                       .ipv6_ext(0, 2048)
                       .ipv6_ext(60, 2048)
                       .ipv6_ext(43, 8)
                       .udp(7, 53)
                       .payload(3000)
                       .build();
  const Bytes v4 = udp_frame(53, 1200);
  rte_mbuf* pkts[] = {chain(v4, {}),         chain(v4, {1000}),     chain(v4, {14, 16}),
                      chain(v6, {2000, 2000, 2000}), chain(v6, {60, 1000, 1000, 2000})};
  const uint16_t n = 5;
  BurstFrames bf;
  Pipeline::Frame frames[n];
  bf.describe(pkts, n, frames);
  EXPECT_EQ(bf.gathered(), 0b11100u);  // one segment, or all headers in the first: in place
  for (uint16_t i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    const Bytes whole = linear(pkts[i]);
    EXPECT_EQ(frames[i].wire_len, whole.size());
    const ParsedFrame got = parse_frame(frames[i].data, frames[i].len, frames[i].wire_len);
    const ParsedFrame want = parse_frame(whole.data(), uint32_t(whole.size()));
    ASSERT_EQ(got.status, FrameStatus::ok) << (got.malformed_reason ? got.malformed_reason : "");
    EXPECT_EQ(got.frame_len, want.frame_len);
    EXPECT_EQ(got.l4_offset, want.l4_offset);
    EXPECT_EQ(got.dst_port, 53);
    EXPECT_EQ(got.match_word, want.match_word);
    // The bytes handed over are the frame's own first bytes.
    EXPECT_TRUE(std::equal(frames[i].data, frames[i].data + frames[i].len, whole.begin()));
  }
  EXPECT_EQ(frames[2].len, BurstFrames::kFirstGatherBytes);
  // The v6 headers end at 14 + 40 + 4104 + 8: both chains needed more than one step.
  EXPECT_GE(frames[3].len, 14u + 40u + 4104u + 8u);
  EXPECT_GE(frames[4].len, 14u + 40u + 4104u + 8u);
}

TEST_F(BurstFramesTest, WriteBackCopiesOnlyTheGatheredFramesChanges) {
  const Bytes f = udp_frame(53, 600);
  rte_mbuf* pkts[] = {chain(f, {20, 20}), chain(f, {100})};
  BurstFrames bf;
  Pipeline::Frame frames[2];
  bf.describe(pkts, 2, frames);
  ASSERT_EQ(bf.gathered(), 0b01u);
  frames[0].data[15] = 0xb8;  // as a DSCP mark would
  frames[0].data[30] = 0x11;  // in the second segment
  bf.write_back(pkts, 2, frames);
  Bytes want = f;
  want[15] = 0xb8;
  want[30] = 0x11;
  EXPECT_EQ(linear(pkts[0]), want);
  EXPECT_EQ(linear(pkts[1]), f);
}

}  // namespace
}  // namespace sluice

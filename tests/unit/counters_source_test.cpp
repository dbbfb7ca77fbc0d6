// CountersSource (dataplane/servers/counters_source.hpp): the counters sluiced's readers take
// on demand. A reader gets a snapshot at most max_age old, asking the producer (a real thread
// here, standing for sluiced's control loop) for a fresh one when the latest is older;
// nothing is taken while nobody asks; counters only grow; after finish() nobody waits. And
// `stats` encoded on demand, once per snapshot, is the reply the service gave when it encoded
// every published snapshot.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "control_messages.hpp"
#include "control_service.hpp"
#include "counters_source.hpp"
#include "counters_wire.hpp"

using namespace sluice;
using namespace std::chrono_literals;

namespace {

CountersSnapshot counted(uint64_t packets) {
  CountersSnapshot s;
  RuleSnapshot r;
  r.name = "dns";
  r.traffic.packets[size_t(Outcome::matched)] = packets;
  s.rules.push_back(r);
  s.default_rule.name = "default";
  return s;
}

uint64_t matched(const CountersSource::Taken& t) {
  return t.snap->rules.at(0).traffic.pkts(Outcome::matched);
}

// A producer thread like sluiced's control loop: a snapshot only when asked, each one
// counting more packets than the one before.
class Producer {
 public:
  explicit Producer(CountersSource& source) : source_(source) {
    source_.serve_on_demand();
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        if (source_.wait_for_demand(CountersSource::Clock::now() + 5ms)) {
          taken_.fetch_add(1);
          source_.publish(counted(1000 * taken_.load()));
        }
      }
    });
  }
  ~Producer() {
    stop_.store(true);
    thread_.join();
  }
  int taken() const { return taken_.load(); }

 private:
  CountersSource& source_;
  std::atomic<bool> stop_{false};
  std::atomic<int> taken_{0};
  std::thread thread_;
};

TEST(CountersSource, WithoutAProducerAnswersTheLatestAtOnce) {
  CountersSource source;
  const auto start = CountersSource::Clock::now();
  EXPECT_EQ(source.get(0ms, 10s).snap, nullptr);
  source.publish(counted(5));
  const auto t = source.get(0ms, 10s);
  EXPECT_LT(CountersSource::Clock::now() - start, 1s) << "nobody produces: nothing to wait for";
  ASSERT_NE(t.snap, nullptr);
  EXPECT_EQ(matched(t), 5u);
  EXPECT_EQ(t.seq, 1u);
}

TEST(CountersSource, NothingIsTakenWhileNobodyAsksAndAStaleSnapshotIsRefreshed) {
  CountersSource source;
  Producer producer(source);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(producer.taken(), 0) << "a snapshot taken with no reader";

  const auto first = source.get(20ms, 10s);
  ASSERT_NE(first.snap, nullptr) << "the producer did not answer the first ask";
  EXPECT_EQ(producer.taken(), 1);
  // Young enough: the same snapshot, nothing asked.
  const auto again = source.get(10s, 10s);
  EXPECT_EQ(again.seq, first.seq);
  EXPECT_EQ(again.snap, first.snap);
  EXPECT_EQ(producer.taken(), 1);
  // Older than max_age: a fresh one, counting more.
  std::this_thread::sleep_for(30ms);
  const auto fresh = source.get(20ms, 10s);
  EXPECT_GT(fresh.seq, first.seq);
  EXPECT_GT(matched(fresh), matched(first));
  EXPECT_EQ(producer.taken(), 2);
}

TEST(CountersSource, ManyReadersSeeCountersThatOnlyGrow) {
  CountersSource source;
  Producer producer(source);
  std::atomic<bool> went_down{false};
  std::atomic<int> answers{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      uint64_t last = 0;
      for (int n = 0; n < 200; ++n) {
        const auto t = source.get(0ms, 10s);
        if (!t.snap) continue;
        if (matched(t) < last) went_down.store(true);
        last = matched(t);
        answers.fetch_add(1);
      }
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_FALSE(went_down.load());
  EXPECT_EQ(answers.load(), 800);
  // Readers asking at once share snapshots: fewer taken than asked for.
  EXPECT_LE(producer.taken(), 800);
  EXPECT_GE(producer.taken(), 200);
}

TEST(CountersSource, AReaderWaitsOnlyItsPatienceAndNotAtAllOnceFinished) {
  CountersSource source;
  source.publish(counted(1));
  source.serve_on_demand();  // a producer that never answers
  auto start = CountersSource::Clock::now();
  auto t = source.get(0ms, 30ms);
  EXPECT_GE(CountersSource::Clock::now() - start, 30ms);
  ASSERT_NE(t.snap, nullptr);
  EXPECT_EQ(matched(t), 1u) << "the latest stands in";

  source.finish();
  start = CountersSource::Clock::now();
  t = source.get(0ms, 10s);
  EXPECT_LT(CountersSource::Clock::now() - start, 1s);
  EXPECT_EQ(matched(t), 1u);
}

std::string stats_of(ControlService& service) {
  return service.handle(R"({"version":2,"id":9,"op":"stats"})");
}

TEST(CountersSource, StatsEncodedOnDemandIsTheReplyOfTheSnapshot) {
  ControlService service(nullptr, RuleSet{});
  auto source = std::make_shared<CountersSource>();
  service.set_counters(source);
  CountersSnapshot snap = counted(42);
  snap.ports.push_back({0, 10, 9, 1, 640, 576});
  snap.dataplane = {{"rx_packets", 10, false}, {"mbufs_in_use", 77, true}};
  source->publish(snap);
  // What the service answered when it encoded every published snapshot.
  const std::string expected = wire::encode_result(9, {{"counters", encode_counters(snap)}});
  EXPECT_EQ(stats_of(service), expected);
  EXPECT_EQ(stats_of(service), expected) << "the cached encoding";
  // A new snapshot is encoded anew, not served from the cache.
  source->publish(counted(43));
  EXPECT_EQ(stats_of(service), wire::encode_result(9, {{"counters", encode_counters(counted(43))}}));
  // publish() goes to the source the service uses now.
  service.publish(counted(44));
  EXPECT_EQ(matched(source->latest()), 44u);
  EXPECT_EQ(stats_of(service), wire::encode_result(9, {{"counters", encode_counters(counted(44))}}));
}

}  // namespace

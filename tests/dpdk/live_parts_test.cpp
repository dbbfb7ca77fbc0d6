// The live dataplane's pure parts, without EAL: port pairing and queue planning, and the TX
// buffer's back-pressure behaviour.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "live/port_plan.hpp"
#include "live/tx_buffer.hpp"

namespace sluice {
namespace {

std::vector<PortLimits> ports(std::initializer_list<uint16_t> ids, uint16_t queues = 16) {
  std::vector<PortLimits> v;
  for (uint16_t id : ids) v.push_back({id, queues, queues});
  return v;
}

TEST(PortPlan, NoPortsIsAnError) {
  auto plan = plan_ports({}, 2);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("no ports"), std::string::npos) << plan.error().message;
}

TEST(PortPlan, OddPortCountAboveOneIsAnError) {
  for (auto list : {ports({0, 1, 2}), ports({0, 1, 2, 3, 4})}) {
    auto plan = plan_ports(list, 2);
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("odd number of ports (" + std::to_string(list.size()) + ")"),
              std::string::npos)
        << plan.error().message;
  }
}

TEST(PortPlan, NoWorkersIsAnError) {
  auto plan = plan_ports(ports({0, 1}), 0);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("no worker lcore"), std::string::npos);
}

TEST(PortPlan, DuplicatePortIsAnError) {
  EXPECT_FALSE(plan_ports(ports({3, 3}), 1));
}

TEST(PortPlan, SinglePortSendsBackOutOfItself) {
  auto plan = plan_ports(ports({5}), 2);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->peer, std::vector<uint16_t>{5});
  EXPECT_EQ(plan->queues, std::vector<uint16_t>{2});
  ASSERT_EQ(plan->rx.size(), 2u);
  for (const RxAssignment& a : plan->rx) {
    EXPECT_EQ(a.rx_port, 5);
    EXPECT_EQ(a.tx_port, 5);
    EXPECT_EQ(a.worker, a.queue);  // worker w polls queue w
  }
}

TEST(PortPlan, PairsZeroOneTwoThree) {
  auto plan = plan_ports(ports({0, 1, 2, 3}), 1);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->peer, (std::vector<uint16_t>{1, 0, 3, 2}));
  // Port ids need not be 0..n-1: pairs follow the order given.
  auto odd_ids = plan_ports(ports({7, 4}), 1);
  ASSERT_TRUE(odd_ids);
  EXPECT_EQ(odd_ids->peer, (std::vector<uint16_t>{4, 7}));
}

TEST(PortPlan, OneQueuePerWorkerAndEachTxQueueHasOneUser) {
  auto plan = plan_ports(ports({0, 1, 2, 3}), 3);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->queues, (std::vector<uint16_t>{3, 3, 3, 3}));
  std::set<std::pair<uint16_t, uint16_t>> tx_queues;
  std::map<unsigned, int> per_worker;
  for (const RxAssignment& a : plan->rx) {
    EXPECT_TRUE(tx_queues.insert({a.tx_port, a.queue}).second) << "TX queue used twice";
    EXPECT_EQ(a.worker, a.queue);
    ++per_worker[a.worker];
  }
  EXPECT_EQ(plan->rx.size(), 12u);
  for (auto& [w, n] : per_worker) EXPECT_EQ(n, 4) << w;  // one queue of each port
  EXPECT_TRUE(plan->notes.empty());
}

TEST(PortPlan, DeviceLimitsCapTheQueuesOfThePairAndAreReported) {
  // Port 1 allows one TX queue: both ports of the pair get one queue (RX q -> peer TX q).
  std::vector<PortLimits> limits = {{0, 8, 8}, {1, 8, 1}};
  auto plan = plan_ports(limits, 4);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->queues, (std::vector<uint16_t>{1, 1}));
  ASSERT_EQ(plan->rx.size(), 2u);
  // The two RX queues still go to two different workers.
  EXPECT_NE(plan->rx[0].worker, plan->rx[1].worker);
  EXPECT_FALSE(plan->notes.empty());
}

TEST(TxBuffer, KeepsWhatTheDeviceDidNotTakeAndRetriesInOrder) {
  auto buf = TxBuffer<int>::create(8).value();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(buf.push(i));
  std::vector<int> sent;
  // The device takes 2 of 5.
  size_t taken = buf.flush([&](int* p, uint16_t n) {
    uint16_t k = std::min<uint16_t>(n, 2);
    sent.insert(sent.end(), p, p + k);
    return k;
  });
  EXPECT_EQ(taken, 2u);
  EXPECT_EQ(buf.size(), 3u);
  // A full device takes none: nothing is lost.
  EXPECT_EQ(buf.flush([](int*, uint16_t) { return uint16_t(0); }), 0u);
  EXPECT_EQ(buf.size(), 3u);
  ASSERT_TRUE(buf.push(5));
  taken = buf.flush([&](int* p, uint16_t n) {
    sent.insert(sent.end(), p, p + n);
    return n;
  });
  EXPECT_EQ(taken, 4u);
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(sent, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(TxBuffer, RefusesOnlyWhenFull) {
  auto buf = TxBuffer<int>::create(5).value();  // rounds up to 8
  EXPECT_EQ(buf.capacity(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(buf.push(i));
  EXPECT_FALSE(buf.push(8));
  EXPECT_EQ(buf.size(), 8u);
}

TEST(TxBuffer, WrapsAroundTheRingInTwoSendsAndKeepsOrder) {
  auto buf = TxBuffer<int>::create(8).value();
  std::vector<int> sent;
  auto take_all = [&](int* p, uint16_t n) {
    sent.insert(sent.end(), p, p + n);
    return n;
  };
  int next = 0;
  for (int round = 0; round < 50; ++round) {
    const int k = 1 + round % 8;
    for (int i = 0; i < k; ++i) ASSERT_TRUE(buf.push(next++));
    buf.flush(take_all);
  }
  ASSERT_EQ(int(sent.size()), next);
  for (int i = 0; i < next; ++i) ASSERT_EQ(sent[size_t(i)], i);
}

TEST(TxBuffer, CreateRefusesImpossibleCapacity) {
  for (size_t capacity : {size_t{0}, TxBuffer<int>::kMaxCapacity + 1}) {
    auto buf = TxBuffer<int>::create(capacity);
    ASSERT_FALSE(buf) << capacity;
    EXPECT_EQ(buf.error().kind, ErrorKind::invalid_input);
    EXPECT_NE(buf.error().message.find(std::to_string(capacity)), std::string::npos)
        << buf.error().message;
  }
  auto one = TxBuffer<int>::create(1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->capacity(), 1u);
}

TEST(TxBuffer, ClearHandsBackEverything) {
  auto buf = TxBuffer<int>::create(4).value();
  for (int i = 0; i < 3; ++i) buf.push(i);
  std::vector<int> freed;
  EXPECT_EQ(buf.clear([&](int v) { freed.push_back(v); }), 3u);
  EXPECT_EQ(freed, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(buf.empty());
}

}  // namespace
}  // namespace sluice

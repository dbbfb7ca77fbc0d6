// HeavyHitters (weighted Space-Saving): the heavy keys of a skewed stream in order, weights
// within the sketch's bound of the exact counts, fixed memory, and an index that stays
// consistent through any churn of keys taking over counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "heavy_hitters.hpp"

using namespace sluice;

namespace {

FlowKey key_of(uint64_t n) {
  FlowKey k;
  k.w[0] = 1 | 4 << 8;  // src-ip, IPv4
  k.w[1] = n;
  return k;
}

std::vector<FlowCount> ranked(const HeavyHitters& h) {
  std::vector<FlowCount> v(h.begin(), h.end());
  std::sort(v.begin(), v.end(), [](const FlowCount& a, const FlowCount& b) { return a.weight > b.weight; });
  return v;
}

TEST(HeavyHitters, ExactWhileEveryKeyHasACounter) {
  HeavyHitters h(8, 42);
  for (uint64_t k = 0; k < 8; ++k)
    for (uint64_t i = 0; i <= k; ++i) h.add(7, key_of(k), 2, 1, 100);
  ASSERT_EQ(h.size(), 8u);
  const auto v = ranked(h);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(v[i].key, key_of(7 - i));
    EXPECT_EQ(v[i].weight, 2 * (8 - i));
    EXPECT_EQ(v[i].error, 0u);
    EXPECT_EQ(v[i].packets, 8 - i);
    EXPECT_EQ(v[i].bytes, 100 * (8 - i));
  }
}

TEST(HeavyHitters, TheSameKeyUnderTwoRulesIsTwoFlows) {
  HeavyHitters h(4, 1);
  h.add(1, key_of(5), 3, 3, 3);
  h.add(2, key_of(5), 1, 1, 1);
  ASSERT_EQ(h.size(), 2u);
  const auto v = ranked(h);
  EXPECT_EQ(v[0].state_id, 1u);
  EXPECT_EQ(v[1].state_id, 2u);
}

// 3 heavy keys (4:2:1) in a stream of 20,000 one-off keys, through 32 counters: the heavy
// keys hold the top three counters in order, every weight is at least the true one and at
// most the true one plus its error, and the error stays below W / capacity.
TEST(HeavyHitters, ASkewedStreamKeepsItsHeavyKeysInOrderWithinTheBound) {
  constexpr size_t kCapacity = 32;
  HeavyHitters h(kCapacity, 99);
  std::vector<uint64_t> stream;
  for (int i = 0; i < 4000; ++i) stream.push_back(1);
  for (int i = 0; i < 2000; ++i) stream.push_back(2);
  for (int i = 0; i < 1000; ++i) stream.push_back(3);
  for (uint64_t i = 0; i < 20000; ++i) stream.push_back(1000 + i);
  std::mt19937_64 rng(5);
  std::shuffle(stream.begin(), stream.end(), rng);
  std::map<uint64_t, uint64_t> exact;
  for (uint64_t k : stream) {
    h.add(3, key_of(k), 1, 1, 64);
    ++exact[k];
  }
  const uint64_t total = stream.size();
  EXPECT_EQ(h.size(), kCapacity);
  const auto v = ranked(h);
  ASSERT_GE(v.size(), 3u);
  EXPECT_EQ(v[0].key, key_of(1));
  EXPECT_EQ(v[1].key, key_of(2));
  EXPECT_EQ(v[2].key, key_of(3));
  for (const FlowCount& c : v) {
    const uint64_t truth = exact[c.key.w[1]];
    EXPECT_GE(c.weight, truth) << c.key.w[1];
    EXPECT_LE(c.weight - c.error, truth) << c.key.w[1];
    EXPECT_LE(c.error, total / kCapacity) << c.key.w[1];
  }
  // A key the sketch does not hold weighs at most the smallest counter.
  EXPECT_LE(h.min_weight(), total / kCapacity + 1);
}

// Small capacity, many keys, random weights: the sketch's own invariants after every add (each
// key in at most one counter, found again by its index after the backward-shift deletions of
// counters changing hands) and the exact stream's bound.
TEST(HeavyHitters, ChurnKeepsTheIndexAndTheBounds) {
  HeavyHitters h(5, 3);
  std::mt19937_64 rng(11);
  std::map<uint64_t, uint64_t> exact;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = rng() % 40;
    const uint64_t w = 1 + rng() % 9;
    h.add(1, key_of(k), w, 1, w);
    exact[k] += w;
    std::map<uint64_t, int> seen;
    for (const FlowCount& c : h) ASSERT_EQ(++seen[c.key.w[1]], 1) << "key counted twice at " << i;
    // The key just added must own a counter (it took the smallest or had one).
    ASSERT_EQ(seen.count(k), 1u) << i;
  }
  for (const FlowCount& c : h) {
    EXPECT_GE(c.weight, exact[c.key.w[1]]);
    EXPECT_LE(c.weight - c.error, exact[c.key.w[1]]);
  }
}

TEST(HeavyHitters, MemoryIsFixedAtConstruction) {
  HeavyHitters h(256, 7);
  const size_t before = h.memory_bytes();
  for (uint64_t i = 0; i < 100000; ++i) h.add(1, key_of(i), 1, 1, 1);
  EXPECT_EQ(h.size(), 256u);
  EXPECT_EQ(h.memory_bytes(), before);
  EXPECT_LT(before, 64u * 1024) << "256 counters";
  h.clear();
  EXPECT_EQ(h.size(), 0u);
  h.add(1, key_of(1), 1, 1, 1);
  EXPECT_EQ(ranked(h).at(0).weight, 1u);
}

TEST(HeavyHitters, RefusesACapacityItCannotIndex) {
  EXPECT_FALSE(HeavyHitters::check_capacity(0));
  EXPECT_FALSE(HeavyHitters::check_capacity(HeavyHitters::kMaxCapacity + 1));
  EXPECT_TRUE(HeavyHitters::check_capacity(HeavyHitters::kMaxCapacity));
  EXPECT_EQ(HeavyHitters::check_capacity(0).error().kind, ErrorKind::invalid_input);
}

}  // namespace

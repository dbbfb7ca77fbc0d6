// ns per packet of Classifier::classify at 1, 100, 1,000 and 10,000 rules, the matching rule
// last in the file (every other rule misses), beside the linear first-match walk it replaced
// (tests/common/linear_classifier.hpp), on 4,096 parsed 64-byte UDP frames from 1,000 sources
// (192.0.2.0/22, random source ports, destination 198.51.100.1:53) visited in random order:
//   "prefix": rule i is src 10.(i >> 8).(i & 255).0/24, the last src 192.0.0.0/12;
//   "port-range": rule i is dst-port 1000+5i .. 1003+5i, the last dst-port 53;
//   "mix": by i % 3 a prefix rule as above, a port-range rule as above, or proto tcp with a
//     DSCP; the last proto udp, src 192.0.0.0/12, dst-port 53.
// scripts/bench.sh rules runs it and prints the table docs/BENCHMARKS.md records.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "classifier.hpp"
#include "frame.hpp"
#include "linear_classifier.hpp"
#include "packet_builder.hpp"

namespace {

using namespace sluice;

constexpr size_t kFrames = 4096;
constexpr unsigned kSources = 1000;

Cidr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t len) {
  Cidr x;
  x.family = 4;
  x.addr[0] = a, x.addr[1] = b, x.addr[2] = c, x.addr[3] = d;
  x.prefix_len = len;
  return x;
}

enum class Shape { prefix, port_range, mix };

std::vector<Rule> make_rules(Shape shape, size_t n) {
  std::vector<Rule> rules(n);
  for (size_t i = 0; i + 1 < n; ++i) {
    Match& m = rules[i].match;
    const unsigned kind = shape == Shape::prefix ? 0 : shape == Shape::port_range ? 1 : i % 3;
    if (kind == 0) m.src = v4(10, uint8_t(i >> 8), uint8_t(i), 0, 24);
    if (kind == 1) m.dst_port = PortRange{uint16_t(1000 + 5 * i), uint16_t(1003 + 5 * i)};
    if (kind == 2) m.proto = 6, m.dscp = uint8_t(i % 64);
  }
  Match& last = rules.back().match;
  if (shape != Shape::port_range) last.src = v4(192, 0, 0, 0, 12);
  if (shape != Shape::prefix) last.dst_port = PortRange{53, 53};
  if (shape == Shape::mix) last.proto = 17;
  return rules;
}

std::vector<ParsedFrame> make_frames() {
  std::mt19937_64 rng(1);
  std::vector<ParsedFrame> frames;
  for (size_t i = 0; i < kFrames; ++i) {
    const unsigned s = unsigned(rng() % kSources);
    const std::string src = "192.0." + std::to_string(2 + s / 256) + "." + std::to_string(s % 256);
    const auto f = sluice::testing::PacketBuilder()
                       .ipv4(src, "198.51.100.1")
                       .udp(uint16_t(1024 + rng() % 60000), 53)
                       .build();
    frames.push_back(parse_frame(f.data(), uint32_t(f.size())));
  }
  return frames;
}

template <class C>
void run(benchmark::State& state, Shape shape) {
  const std::vector<Rule> rules = make_rules(shape, size_t(state.range(0)));
  const C classifier(rules);
  const std::vector<ParsedFrame> frames = make_frames();
  size_t i = 0, matched = 0;
  for (auto _ : state) {
    const int r = classifier.classify(frames[i], 0);
    benchmark::DoNotOptimize(r);
    matched += r == int(rules.size()) - 1;
    i = (i + 1) % kFrames;
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  // Every frame must find the last rule: anything else measures the set-up, not the code.
  state.counters["matched"] =
      state.iterations() ? double(matched) / double(state.iterations()) : 0;
}

const bool registered = [] {
  for (auto [shape, name] : {std::pair{Shape::prefix, "prefix"},
                             std::pair{Shape::port_range, "port-range"},
                             std::pair{Shape::mix, "mix"}}) {
    const Shape s = shape;
    benchmark::RegisterBenchmark((std::string("classify, ") + name).c_str(),
                                 [s](benchmark::State& st) { run<Classifier>(st, s); })
        ->ArgName("rules")->Arg(1)->Arg(100)->Arg(1000)->Arg(10'000);
    benchmark::RegisterBenchmark((std::string("linear walk, ") + name).c_str(),
                                 [s](benchmark::State& st) {
                                   run<sluice::testing::LinearClassifier>(st, s);
                                 })
        ->ArgName("rules")->Arg(1)->Arg(100)->Arg(1000)->Arg(10'000);
  }
  return true;
}();

}  // namespace

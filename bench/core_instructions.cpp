// Instructions per packet of the burst pipeline, for callgrind (scripts/bench.sh instructions).
// A fixed trace, built the same way every run: `--flows F` UDP flows of 64-byte frames, flow i
// 10.(i >> 16).(i >> 8).i:(1024 + i % 64512) -> 172.16.(i >> 8).i:53, sent round robin. One
// untimed pass creates every flow through Pipeline::process(); then `--packets N` packets go
// through Pipeline::process_burst(const RulesSnapshot&, ...) in bursts of 32, the function a
// live worker calls per received burst (dataplane/live/worker.cpp). Run it under
//   valgrind --tool=callgrind --collect-atstart=no
//     --toggle-collect='sluice::Pipeline::process_burst(sluice::RulesSnapshot const&*'
// and only those bursts are counted: parse, classify, key and hash, flow-table lookup, bucket,
// counters and verdicts. Deterministic: a fixed hash seed, a synthetic clock (one burst every
// 2 us, every packet conforms), one thread (single writer, as a one-worker dataplane runs).
//
//   sluice-bench-instructions --rules none|tb-5tuple|srtcm-dst|srtcm-dst-pinned|tb-5tuple-after:N
//                             [--flows F] [--packets N]
//
// Prints the packets measured and how many were forwarded (all, with these rules) on stdout;
// exits 1 if any was not.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pipeline.hpp"
#include "rules_loader.hpp"
#include "synthetic_trace.hpp"

namespace {

using namespace sluice;

constexpr size_t kBurst = 32;
constexpr uint32_t kFrameBytes = 64;
constexpr uint64_t kStartNs = 1'000'000'000;
constexpr uint64_t kBurstGapNs = 2000;  // 32 frames per 2 us: 16 Mpps offered

// One srTCM meter per destination (issue 14's qos_meter peer), every packet green; `match`
// and `extra` are the rule's match and any further fields.
std::string srtcm_per_dst(const std::string& match, const std::string& extra = "") {
  return "default: {action: pass}\nrules:\n  - {name: per-dst, match: " + match + extra +
         ", key: dst-ip, rate: 1Gbit, burst: 64KiB, excess-burst: 64KiB, algorithm: srtcm,\n"
         "     actions: {green: pass, yellow: \"mark-dscp:AF13\", red: drop}}\n";
}
const std::string kSrtcmPerDst = srtcm_per_dst("{proto: udp}");
// The same meter with the destinations pinned by the match (the trace's are in
// 172.16.0.0/16): a dense flow table, each destination's meter at its offset (dense_key.hpp),
// as qos_meter indexes its meters by the destination's last byte.
const std::string kSrtcmPerDstPinned =
    srtcm_per_dst("{proto: udp, dst: 172.16.0.0/16}", ", max-flows: 65536");

const char* const kNoRules = "default: {action: pass}\nrules: []\n";

// tb-5tuple's rule last after n - 1 keyed prefix rules no frame of the trace matches
// (src 11.(i >> 8).(i & 255).0/24, the shape of bench/dataplane/rules_scale.py's prefix
// rules): what the rule count adds per packet.
std::string tb_after(size_t n) {
  std::string text = "default: {action: pass}\nrules:\n";
  for (size_t i = 0; i + 1 < n; ++i)
    text += "  - {name: r" + std::to_string(i) + ", match: {src: 11." + std::to_string(i >> 8) +
            "." + std::to_string(i & 255) +
            ".0/24}, key: 5-tuple, rate: 1Mpps, burst: 1000, algorithm: token-bucket, "
            "action: drop, max-flows: 64}\n";
  text += "  - {name: per-flow, match: {proto: udp}, key: 5-tuple, rate: 1Mpps, burst: 1000,\n"
          "     algorithm: token-bucket, action: drop}\n";
  return text;
}

// Every flow once, in order, a destination per flow.
std::vector<uint8_t> make_trace(size_t flows) {
  std::vector<uint32_t> order(flows);
  for (size_t f = 0; f < flows; ++f) order[f] = uint32_t(f);
  return bench::synthetic_trace(order, kFrameBytes, bench::TraceDst::per_flow);
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: sluice-bench-instructions --rules none|tb-5tuple|srtcm-dst|srtcm-dst-pinned|tb-5tuple-after:N "
               "[--flows F] [--packets N]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const char* rules_text = nullptr;
  std::string scaled;  // rules_text of tb-5tuple-after:N
  size_t flows = 1000, packets = 65536;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage();
    const std::string value = argv[++i];
    if (arg == "--rules") {
      rules_text = value == "none"        ? kNoRules
                   : value == "tb-5tuple" ? bench::kPerFlowRules
                   : value == "srtcm-dst" ? kSrtcmPerDst.c_str()
                   : value == "srtcm-dst-pinned" ? kSrtcmPerDstPinned.c_str()
                                                 : nullptr;
      if (value.rfind("tb-5tuple-after:", 0) == 0) {
        const size_t n = std::strtoull(value.c_str() + 16, nullptr, 10);
        if (n == 0 || n > 100'000) usage();
        scaled = tb_after(n);
        rules_text = scaled.c_str();
      }
      if (!rules_text) usage();
    } else if (arg == "--flows") {
      flows = std::strtoull(value.c_str(), nullptr, 10);
    } else if (arg == "--packets") {
      packets = std::strtoull(value.c_str(), nullptr, 10);
    } else {
      usage();
    }
  }
  if (!rules_text || flows == 0 || flows > 16'000'000 || packets == 0) usage();

  auto rules = load_rules_text(rules_text, "bench");
  if (!rules) {
    std::fprintf(stderr, "bench: rules rejected: %s\n", rules.error().message.c_str());
    return 1;
  }
  PipelineOptions opts;
  opts.default_max_flows = flows;
  opts.hash_seed = 0x5eed;
  opts.single_writer = true;
  auto created = Pipeline::create(std::move(*rules), opts);
  if (!created) {
    std::fprintf(stderr, "bench: %s\n", created.error().message.c_str());
    return 1;
  }
  Pipeline& pipeline = **created;
  std::vector<uint8_t> trace = make_trace(flows);
  WorkerCounters counters = pipeline.make_counters();
  uint64_t now_ns = kStartNs;

  // Every flow's first packet, outside the measured function.
  for (size_t f = 0; f < flows; ++f)
    pipeline.process(trace.data() + f * kFrameBytes, kFrameBytes, 0, now_ns, counters);
  now_ns += kBurstGapNs;

  Pipeline::Frame burst[kBurst];
  Verdict verdicts[kBurst];
  size_t at = 0, forwarded = 0;
  for (size_t done = 0; done < packets; done += kBurst) {
    const size_t n = packets - done < kBurst ? packets - done : kBurst;
    for (size_t i = 0; i < n; ++i) {
      burst[i] = {trace.data() + at * kFrameBytes, kFrameBytes, kFrameBytes};
      at = at + 1 == flows ? 0 : at + 1;
    }
    // As a worker does: the snapshot once per burst loop, then the burst (the counted call).
    const RulesSnapshot& snap = pipeline.enter(counters, now_ns);
    // As a worker asks: no verdict written for a burst that all leaves now.
    const size_t not_now = pipeline.process_burst(snap, burst, n, 0, now_ns, counters, verdicts,
                                                  VerdictFill::unless_all_now);
    if (not_now == 0) {
      forwarded += n;
    } else {
      for (size_t i = 0; i < n; ++i) forwarded += verdicts[i].kind == Verdict::Kind::forward;
    }
    now_ns += kBurstGapNs;
  }
  std::printf("packets %zu forwarded %zu flows %zu\n", packets, forwarded, flows);
  return forwarded == packets ? 0 : 1;
}

// libFuzzer target, differential: token-bucket vs gcra vs the exact real-number model
// (tests/common/reference_model.hpp) on fuzzed rates, bursts and traces, with bursts at one
// instant and idles of days. Token-bucket and gcra must decide every packet identically,
// single charges and whole bursts (limiters.hpp) alike; admitted cost never exceeds
// B + r*T (SPEC §3). An exact profile (a token's interval is whole units) must decide as the
// exact model does, packet for packet, as long as no gap is longer than the forward range of
// the credit (2^62 u here; bucket_math.h "Long idle"). Fallback profiles (rates with many
// significant digits) round, by design, within 1e-4: for them the model is the bound above.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bucket_math.h"
#include "fuzz_input.hpp"
#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "reference_model.hpp"

using namespace sluice;
using sluice::fuzz::FuzzInput;
using sluice::testing::ExactTokenBucket;

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_bucket_diff: %s\n", what);
    std::abort();
  }
}

bool exact_profile(const Rate& r, const sl_rate_profile& p) {
  unsigned __int128 interval = (unsigned __int128)1000000000u * r.per_sec_den * p.time_mult;
  return interval % r.per_sec_num == 0 &&
         (unsigned __int128)sl_cost_u(&p, 1) == interval / r.per_sec_num;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  Rate r;
  r.unit = in.flag() ? CostUnit::bytes : CostUnit::packets;
  // Round numbers (as operators write them) half the time, anything in range otherwise.
  static const uint64_t kRound[] = {1, 3, 1000, 64'000, 1'000'000, 1'250'000'000,
                                    10'000'000, 800'000'000, 50'000'000'000};
  r.per_sec_num = in.flag() ? kRound[in.range(0, 8)] : in.range(1, 50'000'000'000ull);
  r.per_sec_den = in.flag() ? 1 : in.range(1, 1000);
  if (r.unit == CostUnit::packets && r.per_sec_num > 800'000'000ull * r.per_sec_den) return 0;
  const bool bytes = r.unit == CostUnit::bytes;
  const uint64_t burst = bytes ? in.range(64, 4'000'000) : in.range(1, 100'000);
  auto made = make_rate_profile(r, burst);
  if (!made) return 0;
  const sl_rate_profile p = *made;
  const bool exact = exact_profile(r, p);

  uint64_t now = in.u64() >> 1;  // the model does not wrap
  const uint64_t first = now;
  ExactTokenBucket model(r, burst, now);
  uint64_t tb = sl_tb_init(&p, now), gcra = sl_gcra_init(&p, now);
  std::atomic<uint64_t> tb_burst{sl_tb_init(&p, now)}, gcra_burst{sl_gcra_init(&p, now)};
  const double per_token_ns = 1e9 * double(r.per_sec_den) / double(r.per_sec_num);
  bool in_range = true;  // no gap so far beyond the credit's forward range
  unsigned __int128 admitted_cost = 0;
  const unsigned __int128 scale = (unsigned __int128)r.per_sec_den * 1'000'000'000u;
  for (int step = 0; step < 256 && !in.empty(); ++step) {
    const uint64_t before = now;
    switch (in.range(0, 7)) {
      case 0: break;                                                   // same instant
      case 1: now += in.range(0, 1000); break;                         // ns apart
      case 2: now += uint64_t(per_token_ns * double(in.range(0, 3000))); break;  // ~ the rate
      case 3: now += in.range(0, 400ull * 86400 * 1'000'000'000); break;         // days
      case 4: now += uint64_t(per_token_ns * double(burst)) + in.range(0, 1000); break;  // refill
      default: now += uint64_t(per_token_ns * double(in.range(0, 64))); break;
    }
    if (now >= (uint64_t{1} << 63) + (uint64_t{1} << 62)) return 0;  // keep the model unwrapped
    if ((unsigned __int128)(now - before) * p.time_mult >= (unsigned __int128)1 << 62)
      in_range = false;
    // A burst of n packets at this instant.
    const uint32_t n = uint32_t(in.range(1, kMaxBurst));
    uint64_t costs[kMaxBurst];
    uint64_t single_mask = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t cost = bytes ? (in.flag() ? in.range(1, burst + 2) : in.range(64, 1518)) : 1;
      costs[i] = cost;
      uint64_t next_tb, next_gcra;
      const int a = sl_tb_decide(&p, tb, now, cost, &next_tb);
      const int b = sl_gcra_decide(&p, gcra, now, cost, &next_gcra);
      check(a == b, "token-bucket and gcra disagree");
      tb = next_tb;
      gcra = next_gcra;
      const bool m = model.charge(now, cost);
      if (exact && in_range && a != int(m)) {
        std::fprintf(stderr, "rate %llu/%llu %s burst %llu mult %u: packet of step %d at +%llu ns\n",
                     (unsigned long long)r.per_sec_num, (unsigned long long)r.per_sec_den,
                     bytes ? "B/s" : "pps", (unsigned long long)burst, p.time_mult, step,
                     (unsigned long long)(now - first));
        check(false, "an exact profile disagrees with the exact model");
      }
      if (a) admitted_cost += cost;
      single_mask |= uint64_t(a) << i;
    }
    check(token_bucket_charge_burst(p, tb_burst, now, costs, n, Sharing::single_writer) ==
              single_mask,
          "token-bucket burst differs from single charges");
    check(gcra_charge_burst(p, gcra_burst, now, costs, n, Sharing::single_writer) == single_mask,
          "gcra burst differs from single charges");
    check(admitted_cost * scale <=
              (unsigned __int128)burst * scale + (unsigned __int128)(now - first) * r.per_sec_num,
          "admitted more than B + r*T");
  }
  return 0;
}

#include "worker.hpp"

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <new>
#include <stdexcept>

#include "mbuf_frames.hpp"

namespace sluice {

namespace {


// Single-writer counter: a plain load and store, no locked instruction on the hot path.
inline void bump(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace

WorkerStats& WorkerStats::operator+=(const WorkerStats& o) {
  rx_packets += o.rx_packets;
  tx_packets += o.tx_packets;
  tx_dropped += o.tx_dropped;
  shaper_overflow += o.shaper_overflow;
  shutdown_dropped += o.shutdown_dropped;
  flows_expired += o.flows_expired;
  return *this;
}

Worker::Worker(Pipeline& pipeline, WorkerSetup setup, const std::atomic<bool>* stop,
               std::vector<TxQueue> tx, TimingWheel<HeldPacket> wheel)
    : pipeline_(pipeline),
      stop_(stop),
      setup_(std::move(setup)),
      clock_(setup_.clock),
      counters_(pipeline.make_counters()),
      handoff_(counters_),
      flows_(setup_.flows),
      tx_(std::move(tx)),
      wheel_(std::move(wheel)) {
  // Neighbouring workers take different halves of the flow sets (RSS gives them different
  // flows), so that each writes lines the other seldom reads.
  counters_.table_half = uint8_t(setup_.rcu_thread_id % 2);
}

Result<std::unique_ptr<Worker>> Worker::create(Pipeline& pipeline, WorkerSetup setup,
                                               const std::atomic<bool>* stop) {
  if (setup.burst == 0 || setup.burst > kMaxBurst)
    return make_error("burst size must be in [1, " + std::to_string(kMaxBurst) + "]");
  for (const WorkerRx& r : setup.rx)
    if (r.tx >= setup.tx.size()) return make_error("worker RX queue without a TX queue");
  const std::string where = "worker on lcore " + std::to_string(setup.lcore) + ": ";
  auto wheel = TimingWheel<HeldPacket>::create(setup.slot_ns, setup.horizon_ns, setup.wheel_capacity,
                                               /*start_ns=*/0);
  if (!wheel) return make_error(where + wheel.error().message, wheel.error().kind);
  if (Status flows = FlowSampler::check(setup.flows); !flows)
    return make_error(where + flows.error().message, flows.error().kind);
  std::vector<TxQueue> tx;
  tx.reserve(setup.tx.size());
  for (const WorkerTx& t : setup.tx) {
    auto buffer = TxBuffer<rte_mbuf*>::create(setup.tx_buffer_capacity);
    if (!buffer) return make_error(where + buffer.error().message, buffer.error().kind);
    tx.push_back({t, std::move(buffer).value()});
  }
  return std::unique_ptr<Worker>(
      new Worker(pipeline, std::move(setup), stop, std::move(tx), std::move(wheel).value()));
}

Worker::~Worker() { shutdown(/*try_send=*/false); }

WorkerStats Worker::stats() const {
  WorkerStats s;
  s.rx_packets = stats_.rx_packets.load(std::memory_order_relaxed);
  s.tx_packets = stats_.tx_packets.load(std::memory_order_relaxed);
  s.tx_dropped = stats_.tx_dropped.load(std::memory_order_relaxed);
  s.shaper_overflow = stats_.shaper_overflow.load(std::memory_order_relaxed);
  s.shutdown_dropped = stats_.shutdown_dropped.load(std::memory_order_relaxed);
  s.flows_expired = stats_.flows_expired.load(std::memory_order_relaxed);
  return s;
}

const RulesSnapshot& Worker::enter_rules(uint64_t now_ns) {
  const RulesSnapshot& rules = pipeline_.enter(counters_, now_ns);
  if (snapshot_generation(rules) != rules_generation_) [[unlikely]] {
    rules_generation_ = snapshot_generation(rules);
    expire_interval_ns_ = setup_.expire_interval_ns != 0
                              ? setup_.expire_interval_ns
                              : Pipeline::expire_interval_ns(rules, setup_.expire_budget,
                                                             setup_.expire_callers);
  }
  return rules;
}

void Worker::run() {
  rte_mbuf* pkts[kMaxBurst];
  uint64_t next_expire_ns = 0;
  if (setup_.rcu) rte_rcu_qsbr_thread_online(setup_.rcu, setup_.rcu_thread_id);
  while (!stop_->load(std::memory_order_relaxed)) {
    // Quiescent: nothing of the rules loaded in an earlier loop is held past here. Then the
    // rules of this loop, entered once, at its first clock read: a change applies between two
    // loops, never inside one. (Entered after the first RX burst rather than before it, so
    // the loop reads the TSC once per queue and not once more: in this VM the two reads of a
    // one-queue loop were ~4% of a no-rule worker's perf samples.)
    if (setup_.rcu) rte_rcu_qsbr_quiescent(setup_.rcu, setup_.rcu_thread_id);
    if (setup_.grace) setup_.grace->ring_if_done();
    if (setup_.doorbell) setup_.doorbell->ring_if_armed();
    const RulesSnapshot* rules = nullptr;
    uint64_t now_ns = 0;
    for (const WorkerRx& rxq : setup_.rx) {
      const uint16_t n = rte_eth_rx_burst(rxq.port, rxq.queue, pkts, setup_.burst);
      // The one clock read of this burst: every packet in it, and the wheel, use this time.
      now_ns = clock_.to_ns(rte_rdtsc());
      if (rules == nullptr) rules = &enter_rules(now_ns);
      // Held packets due by now leave first. An empty wheel is skipped (its drain is only
      // its clock's move, a 64-bit division per queue and loop): handle_burst moves it
      // before it pushes into it.
      if (!wheel_.empty()) release_due(now_ns);
      if (n != 0) handle_burst(*rules, rxq, pkts, n, now_ns);
    }
    if (rules == nullptr) [[unlikely]] {  // a worker without RX queues
      now_ns = clock_.to_ns(rte_rdtsc());
      rules = &enter_rules(now_ns);
    }
    flush_tx();
    // A burst boundary: every packet so far is counted in full, none in part.
    handoff_.serve(counters_);
    flows_.tick(now_ns);
    // Idle expiry in small slices between bursts, so no single call stalls the loop.
    if (now_ns >= next_expire_ns) {
      const size_t freed = pipeline_.expire_idle(*rules, now_ns, setup_.expire_budget);
      if (freed != 0) bump(stats_.flows_expired, freed);
      next_expire_ns = now_ns + expire_interval_ns_;
    }
  }
  if (setup_.rcu) rte_rcu_qsbr_thread_offline(setup_.rcu, setup_.rcu_thread_id);
  if (setup_.grace) setup_.grace->ring_after_last_loop();
  if (setup_.doorbell) setup_.doorbell->ring_after_last_loop();
  shutdown(/*try_send=*/true);
}

void Worker::handle_burst(const RulesSnapshot& rules, const WorkerRx& rxq, rte_mbuf** pkts,
                          uint16_t n, uint64_t now_ns) {
  bump(stats_.rx_packets, n);
  rte_mbuf* dropped[kMaxBurst];
  rte_mbuf* forward[kMaxBurst];
  uint16_t n_dropped = 0, n_forward = 0;
  uint64_t overflow = 0;

  // The pipeline reads the mbufs in place (mbuf_frames.hpp): it classifies the whole burst
  // first (prefetching each flow's slot), then charges it.
  Verdict* verdicts = verdicts_;
  burst_frames_.begin();
  const MbufFrames src{pkts, &burst_frames_};
  // Before a DSCP mark changes a frame.
  flows_.observe_at(rules, n, rxq.port,
                    [&src](size_t i) -> const Pipeline::Frame& { return src.full(i); });
  const size_t not_now = process_mbuf_burst(rules, src, n, rxq.port, now_ns, counters_, verdicts);
  if (burst_frames_.gathered() != 0) [[unlikely]] burst_frames_.write_back(pkts, n);
  if (not_now == 0) [[likely]] {
    // Every packet leaves now, in order: the burst goes to the TX path as it came, without
    // a look at its verdicts (none was written: VerdictFill::unless_all_now).
    send(tx_[rxq.tx], pkts, n, dropped, n_dropped);
    if (n_dropped != 0) [[unlikely]] rte_pktmbuf_free_bulk(dropped, n_dropped);
    return;
  }
  // The wheel's time only moves on drain: move it before pushing this burst's delays (an
  // empty wheel was not drained this loop; a drained one is again a no-op).
  if (wheel_.empty()) release_due(now_ns);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    const Verdict& v = verdicts[i];
    if (v.kind == Verdict::Kind::drop) {
      dropped[n_dropped++] = m;
    } else if (v.depart_ns > now_ns) {
      // The wheel may release an item up to one slot early: file it under the last
      // nanosecond of its departure slot, so it never leaves before depart_ns.
      if (!wheel_.push(v.depart_ns + setup_.slot_ns - 1, HeldPacket{m, rxq.tx})) {
        dropped[n_dropped++] = m;
        ++overflow;
      }
    } else {
      forward[n_forward++] = m;
    }
  }
  if (n_forward != 0) send(tx_[rxq.tx], forward, n_forward, dropped, n_dropped);
  if (n_dropped != 0) rte_pktmbuf_free_bulk(dropped, n_dropped);
  if (overflow != 0) bump(stats_.shaper_overflow, overflow);
}

void Worker::send(TxQueue& q, rte_mbuf** pkts, uint16_t n, rte_mbuf** dropped,
                  uint16_t& n_dropped) {
  uint16_t sent = 0;
  // Nothing older waiting: hand the burst to the device directly, and buffer only what it
  // refused. Otherwise go behind the waiting packets, so the queue keeps its order.
  if (q.buffer.empty()) sent = transmit(q, pkts, n);
  uint64_t tx_full = 0;
  for (uint16_t i = sent; i < n; ++i) {
    if (!enqueue(q, pkts[i])) {
      dropped[n_dropped++] = pkts[i];
      ++tx_full;
    }
  }
  if (tx_full != 0) bump(stats_.tx_dropped, tx_full);
}

void Worker::release_due(uint64_t now_ns) {
  uint64_t tx_full = 0;  // an empty wheel only advances its time: O(1)
  wheel_.drain(now_ns, [&](uint64_t, HeldPacket&& h) {
    if (!enqueue(tx_[h.tx], h.mbuf)) {
      rte_pktmbuf_free(h.mbuf);
      ++tx_full;
    }
  });
  if (tx_full != 0) bump(stats_.tx_dropped, tx_full);
}

bool Worker::enqueue(TxQueue& q, rte_mbuf* m) {
  if (q.buffer.push(m)) return true;
  // Full: maybe only because many packets became due at once (the wheel after a stall), not
  // because the device pushes back. Offer them to the device before giving up on this one.
  flush(q);
  return q.buffer.push(m);
}

uint16_t Worker::transmit(TxQueue& q, rte_mbuf** pkts, uint16_t n) {
  const uint16_t sent = rte_eth_tx_burst(q.where.port, q.where.queue, pkts, n);
  if (sent != 0) bump(stats_.tx_packets, sent);
  return sent;
}

void Worker::flush(TxQueue& q) {
  q.buffer.flush([&](rte_mbuf** p, uint16_t n) { return transmit(q, p, n); });
}

void Worker::flush_tx() {
  for (TxQueue& q : tx_)
    if (!q.buffer.empty()) flush(q);
}

void Worker::shutdown(bool try_send) {
  uint64_t freed = wheel_.drain_all([](uint64_t, HeldPacket&& h) { rte_pktmbuf_free(h.mbuf); });
  if (try_send) flush_tx();
  for (TxQueue& q : tx_) freed += q.buffer.clear([](rte_mbuf* m) { rte_pktmbuf_free(m); });
  if (freed != 0) bump(stats_.shutdown_dropped, freed);
}

}  // namespace sluice

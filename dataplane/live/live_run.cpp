#include "live_run.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

#include "control_server.hpp"
#include "counters_json.hpp"
#include "flow_table.hpp"
#include "dataplane.hpp"
#include "eal.hpp"
#include "live_rules_target.hpp"
#include "log.hpp"
#include "memory_budget.hpp"
#include "metrics_server.hpp"
#include "output_file.hpp"
#include "pipeline.hpp"
#include "report.hpp"
#include "rules_loader.hpp"
#include "signals.hpp"
#include "telemetry.hpp"

namespace sluice {

namespace {

using Clock = std::chrono::steady_clock;

// How often the control loop wakes when nobody asks for counters: bounds the delay between a
// signal and the stop.
constexpr auto kControlTick = std::chrono::milliseconds(20);
constexpr auto kLinkPoll = std::chrono::seconds(1);
// The control socket's threads (ControlLimits): SCHED_FIFO at the lowest RT priority where
// permitted (root, CAP_SYS_NICE, RLIMIT_RTPRIO), else nice -10.
constexpr int kControlThreadRtPriority = 1;
constexpr int kControlThreadNice = -10;

Result<std::unique_ptr<Pipeline>> make_pipeline(const LiveOptions& opts) {
  auto rules = load_rules_file(opts.config_path);
  if (!rules) return rules.error();
  PipelineOptions popts;
  if (opts.flows != 0) popts.default_max_flows = opts.flows;
  popts.default_max_flows_option = "--flows";
  popts.hash_seed = opts.hash_seed;
  popts.shaping_horizon_ns = opts.max_delay_ns;
  // The start-up rules, and every rule added while it runs (sluicectl), are held to the
  // memory there is then, before their tables are allocated (Pipeline::create and apply): a
  // table the machine cannot back would have the kernel kill sluiced while it fills (a
  // huge-page table, as it is written at creation).
  popts.memory_available = memory_available_now;
  // Flow tables are allocated (and their pages written) here, before any packet.
  auto pipeline = Pipeline::create(std::move(rules).value(), popts);
  if (!pipeline)
    return make_error(opts.config_path + ": " + pipeline.error().message, pipeline.error().kind);
  return pipeline;
}

void print_table(const CountersSnapshot& snap, const DataplaneReport& report) {
  std::fputs(counters_to_table(snap).c_str(), stdout);
  std::fputs(dataplane_report_table(report).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
}

// Everything that shows the counters to others while the dataplane runs: each asks `source`
// for them (the control loop takes a snapshot only then) and never touches the dataplane.
struct CounterReaders {
  std::shared_ptr<CountersSource> source = std::make_shared<CountersSource>();
  std::unique_ptr<ControlServer> control;  // --control
  std::unique_ptr<MetricsServer> metrics;  // --metrics
};

// Before the EAL, so a socket path or address in use or unusable is a usage error that
// takes no device.
Status start_readers(const LiveOptions& opts, const Pipeline& pipeline, CounterReaders* readers) {
  if (!opts.control_socket.empty()) {
    // The control threads float over the workers' CPUs: at a higher priority than the
    // busy-polling workers, a request runs when it comes instead of after a worker's slice.
    ControlLimits limits;
    limits.thread_nice = kControlThreadNice;
    limits.rt_priority = kControlThreadRtPriority;
    auto server = ControlServer::start(opts.control_socket, pipeline.rules(), nullptr, limits);
    if (!server) return server.error();
    readers->control = std::move(server).value();
    readers->control->use_counters(readers->source);
  }
  if (!opts.metrics_addr.empty()) {
    auto server = MetricsServer::start(opts.metrics_addr);
    if (!server) return server.error();
    readers->metrics = std::move(server).value();
    readers->metrics->use_counters(readers->source);
    live_log("metrics: http://%s/metrics (port %u)", opts.metrics_addr.c_str(),
             unsigned(readers->metrics->port()));
  }
  return Ok{};
}

// Until a signal: the counters, taken when a reader asks for fresh ones (CountersSource) and
// printed every --stats-interval, and link-state changes. The workers do everything else.
// Nobody asking costs a wake-up per tick and nothing else: no snapshot, no copy, no encoding.
void control_loop(Dataplane& dp, const StopSignals& signals, uint64_t stats_interval_ms,
                  CountersSource& source) {
  const auto interval = std::chrono::milliseconds(stats_interval_ms);
  auto next_stats = Clock::now() + interval;
  auto next_link = Clock::now() + kLinkPoll;
  source.serve_on_demand();
  while (!signals.requested()) {
    auto wake = Clock::now() + kControlTick;
    if (stats_interval_ms != 0) wake = std::min(wake, next_stats);
    const bool asked = source.wait_for_demand(std::min(wake, next_link));
    const auto now = Clock::now();
    const bool print = stats_interval_ms != 0 && now >= next_stats;
    if (asked || print) {
      CountersSnapshot snap = dp.snapshot();
      if (print) {
        print_table(snap, dp.report());
        next_stats += interval;
        if (next_stats < now) next_stats = now + interval;  // do not catch up after a stall
      }
      source.publish(std::move(snap));
    }
    if (now >= next_link) {
      dp.log_link_changes();
      next_link = now + kLinkPoll;
    }
  }
}

// sluiced's log at exit: where the control requests that went to the worker thread spent
// their time, one line per op (bench_control.sh reads them beside the client's own
// request-to-reply times). For a write, "executed" ends when every worker runs the change.
void log_request_timings(const ControlServer& control) {
  const std::vector<RequestTiming> all = control.request_timings();
  for (const wire::Op op : wire::all_ops()) {
    std::vector<uint64_t> queued, executed, replied;
    for (const RequestTiming& r : all) {
      if (r.op != op) continue;
      queued.push_back(r.queued_ns);
      executed.push_back(r.executed_ns);
      replied.push_back(r.replied_ns);
    }
    if (queued.empty()) continue;
    auto pick = [](std::vector<uint64_t>& v) {
      std::sort(v.begin(), v.end());
      return std::array<double, 3>{double(v[v.size() / 2]) / 1e3,
                                   double(v[v.size() * 99 / 100]) / 1e3, double(v.back()) / 1e3};
    };
    const auto q = pick(queued), e = pick(executed), r = pick(replied);
    live_log("control requests, %s: %zu, from the last byte read (p50 / p99 / max us): taken "
             "%.1f / %.1f / %.1f, executed %.1f / %.1f / %.1f, reply sent %.1f / %.1f / %.1f",
             wire::op_name(op), queued.size(), q[0], q[1], q[2], e[0], e[1], e[2], r[0], r[1],
             r[2]);
  }
}

}  // namespace

Status run_live(const LiveOptions& opts) {
  // The rules first: a bad file is reported before EAL takes memory and devices.
  auto pipeline = make_pipeline(opts);
  if (!pipeline) return pipeline.error();
  if (const std::string tables = FlowTable::totals_line(); !tables.empty())
    live_log("%s", tables.c_str());
  // --report is written at the end: refuse now (a usage error) what it must never replace.
  if (!opts.report_path.empty()) {
    if (Status s = check_outputs({{"--config", opts.config_path}}, {{"--report", opts.report_path}});
        !s)
      return s;
  }

  CounterReaders readers;
  if (Status s = start_readers(opts, **pipeline, &readers); !s)
    return with_kind(s.error(), ErrorKind::invalid_input);

  StopSignals signals;
  auto eal = Eal::init(opts.eal_args);
  if (!eal) return eal.error();

  // Declared after the EAL and the pipeline, so destroyed before them.
  DataplaneConfig config;
  config.mbufs = opts.mbufs;
  if (opts.mbuf_size != 0) config.mbuf_size = opts.mbuf_size;
  if (opts.burst != 0) config.burst = opts.burst;
  config.pool_for_shaping = opts.max_delay_ns != 0;
  auto dp = Dataplane::create(**pipeline, config);
  if (!dp) return dp.error();
  // What a control server changes the running rules through (SPEC §4), from now until the
  // workers stop.
  LiveRulesTarget rules_target(**pipeline, **dp);
  if (Status s = register_telemetry(); !s) return s;
  telemetry_use_counters(readers.source);
  readers.source->publish((*dp)->snapshot());
  if (Status s = (*dp)->start(); !s) return s;

  // From here `sluicectl rule add/set/del` and `config load` reach the workers.
  if (readers.control) readers.control->set_target(&rules_target);
  control_loop(**dp, signals, opts.stats_interval_ms, *readers.source);
  // Nobody takes snapshots for readers any more: they get the latest at once.
  readers.source->finish();
  live_log("signal %d: stopping", signals.signal_number());
  rules_target.stop_changes();
  if (readers.control) log_request_timings(*readers.control);
  // The server outlives rules_target: detach it (waits for a request using it).
  if (readers.control) readers.control->set_target(nullptr);
  // Closed before reporting, so the report can say whether every mbuf came back.
  (*dp)->close();

  const CountersSnapshot snap = (*dp)->snapshot();
  const DataplaneReport report = (*dp)->report();
  // The final figures, for a request that comes in from now on, without waiting.
  readers.source->publish(snap);
  print_table(snap, report);
  const WorkerStats& t = report.totals;
  live_log("stopped: %llu received, %llu sent, %llu dropped on a full TX buffer, %llu on a full "
           "shaper, %llu held at shutdown, %llu idle flows expired",
           static_cast<unsigned long long>(t.rx_packets), static_cast<unsigned long long>(t.tx_packets),
           static_cast<unsigned long long>(t.tx_dropped),
           static_cast<unsigned long long>(t.shaper_overflow),
           static_cast<unsigned long long>(t.shutdown_dropped),
           static_cast<unsigned long long>(t.flows_expired));
  if (!opts.report_path.empty()) {
    if (Status s = write_file_atomically(opts.report_path, live_report_json(snap, report)); !s) return s;
  }
  return Ok{};
}

}  // namespace sluice

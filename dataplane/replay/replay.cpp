#include "replay.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "counters_json.hpp"
#include "departure_queue.hpp"
#include "flow_table.hpp"
#include "memory_budget.hpp"
#include "output_file.hpp"
#include "pcap_io.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"

namespace sluice {

namespace {

// Everything one run needs, set up before the first packet so that bad input is reported
// before any output file exists.
struct ReplayInputs {
  std::unique_ptr<Pipeline> pipeline;
  std::unique_ptr<PcapReader> reader;
};

Result<ReplayInputs> open_inputs(const ReplayOptions& opts) {
  Result<RuleSet> rules = load_rules_file(opts.config_path);
  if (!rules) return rules.error();
  const PipelineOptions popts = PipelineOptions::single_threaded(opts.hash_seed);
  if (Status s = check_flow_memory_available(*rules, popts.default_max_flows,
                                             popts.default_max_flows_option); !s)
    return make_error(opts.config_path + ": " + s.error().message, s.error().kind);
  auto pipeline = Pipeline::create(std::move(rules).value(), popts);
  if (!pipeline)
    return make_error(opts.config_path + ": " + pipeline.error().message, pipeline.error().kind);
  auto reader = PcapReader::open(opts.in_path);
  if (!reader) return reader.error();
  return ReplayInputs{std::move(pipeline).value(), std::move(reader).value()};
}

// The packet loop: reads, processes, and writes in departure order.
class ReplayRun {
 public:
  ReplayRun(Pipeline& pipeline, PcapReader& reader, PcapWriter& writer, size_t expire_budget)
      : pipeline_(pipeline),
        reader_(reader),
        writer_(writer),
        counters_(pipeline.make_counters()),
        queue_(pipeline.max_delay_ns()),
        expire_budget_(expire_budget) {}

  // Errors: a malformed capture (bad input) or a write failure (runtime).
  Status run() {
    PcapPacket pkt;
    for (;;) {
      Result<bool> more = reader_.next(&pkt);
      if (!more) return more.error();
      if (!more.value()) break;
      if (Status s = handle(pkt); !s) return s;
    }
    queue_.release_all([&](uint64_t depart_ns, HeldPacket&& p) { emit(depart_ns, p); });
    return write_status_;
  }

  ReplaySummary summary() const {
    ReplaySummary s = summary_;
    s.counters = pipeline_.snapshot({&counters_});
    if (s.counters.ports.empty()) {
      // Replay has one notional port 0: what was read and what was written.
      PortSnapshot port;
      port.rx_packets = s.packets_in;
      port.rx_bytes = rx_bytes_;
      port.tx_packets = s.packets_out;
      port.tx_bytes = tx_bytes_;
      s.counters.ports.push_back(port);
    }
    return s;
  }

 private:
  Status handle(PcapPacket& pkt) {
    const uint64_t now_ns = pkt.ts_ns;
    // Everything due by now leaves before this packet is even looked at.
    queue_.release(now_ns, [&](uint64_t depart_ns, HeldPacket&& p) { emit(depart_ns, p); });
    pipeline_.expire_idle(now_ns, expire_budget_);

    ++summary_.packets_in;
    const uint32_t caplen = uint32_t(pkt.data.size());
    const uint32_t wire_len = std::max(pkt.wire_len, caplen);
    rx_bytes_ += wire_len;
    // A whole record is parsed and charged as the frame it is. A record the capture cut short
    // (caplen < len) is a truncated frame (SPEC §6): the pipeline gets none of its bytes to
    // parse, so it counts as malformed, at its wire length, and follows the default action;
    // OUT.pcap keeps what was captured of it.
    const uint32_t parse_len = caplen < wire_len ? 0 : caplen;
    Verdict v = pipeline_.process(Pipeline::Frame{pkt.data.data(), parse_len, wire_len},
                                  /*port=*/0, now_ns, counters_);
    if (v.kind == Verdict::Kind::drop) {
      ++summary_.packets_dropped;
    } else if (v.depart_ns > now_ns) {
      ++summary_.packets_delayed;
      queue_.hold(v.depart_ns, HeldPacket{seq_, pkt.wire_len, std::move(pkt.data)});
    } else {
      HeldPacket now{seq_, pkt.wire_len, std::move(pkt.data)};
      emit(now_ns, now);
    }
    ++seq_;
    return write_status_;
  }

  // Writes one departing packet (bytes as process() left them, e.g. DSCP re-marked).
  void emit(uint64_t ts_ns, const HeldPacket& p) {
    if (!write_status_) return;  // the first write error is the one reported
    write_status_ = writer_.write(ts_ns, p.frame.data(), uint32_t(p.frame.size()),
                                  std::max<uint32_t>(p.wire_len, uint32_t(p.frame.size())));
    ++summary_.packets_out;
    tx_bytes_ += std::max<uint64_t>(p.wire_len, p.frame.size());
  }

  Pipeline& pipeline_;
  PcapReader& reader_;
  PcapWriter& writer_;
  WorkerCounters counters_;
  DepartureQueue queue_;
  size_t expire_budget_;
  uint64_t seq_ = 0;
  uint64_t rx_bytes_ = 0, tx_bytes_ = 0;
  ReplaySummary summary_;
  Status write_status_ = Ok{};
};

// Writes `text` to an output's stream and closes it.
Status write_text(OutputFile& file, const std::string& text) {
  auto stream = file.open_stream();
  if (!stream) return stream.error();
  const bool written = std::fwrite(text.data(), 1, text.size(), *stream) == text.size() &&
                       std::fflush(*stream) == 0;
  const int write_errno = errno;
  const bool closed = std::fclose(*stream) == 0;
  if (!written || !closed)
    return make_error(file.path() + ": write failed: " + std::strerror(written ? errno : write_errno));
  return Ok{};
}

}  // namespace

Result<ReplaySummary> run_replay(const ReplayOptions& opts) {
  // Before anything is read or written: no output may destroy an input or another output.
  if (Status s = check_outputs({{"--replay", opts.in_path}, {"--config", opts.config_path}},
                               {{"--out", opts.out_path}, {"--report", opts.report_path}});
      !s)
    return s.error();
  auto inputs = open_inputs(opts);
  if (!inputs) return inputs.error();
  if (const std::string tables = FlowTable::totals_line(); !tables.empty())
    std::fprintf(stderr, "sluiced: %s\n", tables.c_str());

  auto out_file = OutputFile::open(opts.out_path);
  if (!out_file) return out_file.error();
  auto report_file = OutputFile::open(opts.report_path);
  if (!report_file) return report_file.error();
  auto out_stream = (*out_file)->open_stream();
  if (!out_stream) return out_stream.error();
  auto writer = PcapWriter::create(*out_stream, opts.out_path);
  if (!writer) return writer.error();

  ReplayRun run(*inputs->pipeline, *inputs->reader, **writer, opts.expire_budget);
  if (Status s = run.run(); !s) return s.error();
  if (Status s = (*writer)->close(); !s) return s.error();

  ReplaySummary summary = run.summary();
  if (Status s = write_text(**report_file, counters_to_json(summary.counters)); !s) return s.error();
  if (Status s = (*out_file)->commit(); !s) return s.error();
  if (Status s = (*report_file)->commit(); !s) return s.error();
  return summary;
}

}  // namespace sluice

#include "report.hpp"

#include "counters_json.hpp"

namespace sluice {

namespace {

void field(std::string& out, const char* key, uint64_t value, bool* first) {
  if (!*first) out += ", ";
  *first = false;
  out += '"';
  out += key;
  out += "\": ";
  out += std::to_string(value);
}

// A worker's counters under their REPORT.json names: the one list of them.
template <class Fn>
void for_each_worker_stat(const WorkerStats& s, Fn&& fn) {
  fn("rx_packets", s.rx_packets);
  fn("tx_packets", s.tx_packets);
  fn("dropped_tx_buffer_full", s.tx_dropped);
  fn("dropped_shaper_full", s.shaper_overflow);
  fn("dropped_at_shutdown", s.shutdown_dropped);
  fn("flows_expired", s.flows_expired);
}

void worker_fields(std::string& out, const WorkerStats& s, bool* first) {
  for_each_worker_stat(s, [&](const char* key, uint64_t value) { field(out, key, value, first); });
}

}  // namespace

std::string dataplane_report_json(const DataplaneReport& r) {
  std::string out = "{";
  bool first = true;
  worker_fields(out, r.totals, &first);
  field(out, "mbufs_total", r.mbufs.total, &first);
  field(out, "mbufs_in_use", r.mbufs.in_use, &first);
  field(out, "mbufs_kept_by_drivers", r.mbufs.kept_by_drivers, &first);
  field(out, "mbufs_leaked", r.mbufs.leaked, &first);
  out += ",\n    \"ports\": [";
  for (size_t i = 0; i < r.ports.size(); ++i) {
    const PortReport& p = r.ports[i];
    out += i == 0 ? "\n      {" : ",\n      {";
    bool f = true;
    field(out, "port", p.errors.port, &f);
    out += ", \"name\": " + json_quote(p.name) + ", \"driver\": " + json_quote(p.driver);
    field(out, "rx_nombuf", p.errors.rx_nombuf, &f);
    field(out, "rx_errors", p.errors.rx_errors, &f);
    field(out, "tx_errors", p.errors.tx_errors, &f);
    out += '}';
  }
  out += r.ports.empty() ? "]" : "\n    ]";
  out += ",\n    \"workers\": [";
  for (size_t i = 0; i < r.workers.size(); ++i) {
    out += i == 0 ? "\n      {" : ",\n      {";
    bool f = true;
    field(out, "lcore", r.workers[i].lcore, &f);
    worker_fields(out, r.workers[i].stats, &f);
    out += '}';
  }
  out += r.workers.empty() ? "]" : "\n    ]";
  out += "}";
  return out;
}

std::vector<NamedCounter> dataplane_counters(const WorkerStats& totals, const MbufAccount& mbufs) {
  std::vector<NamedCounter> v;
  for_each_worker_stat(totals, [&](const char* key, uint64_t value) { v.push_back({key, value, false}); });
  v.push_back({"mbufs_total", mbufs.total, true});
  v.push_back({"mbufs_in_use", mbufs.in_use, true});
  return v;
}

std::string live_report_json(const CountersSnapshot& snapshot, const DataplaneReport& report) {
  return counters_to_json(snapshot, {{"dataplane", dataplane_report_json(report)}});
}

std::string dataplane_report_table(const DataplaneReport& r) {
  const WorkerStats& t = r.totals;
  std::string out = "dataplane: rx " + std::to_string(t.rx_packets) + "  tx " +
                    std::to_string(t.tx_packets) + "  dropped: tx-buffer-full " +
                    std::to_string(t.tx_dropped) + "  shaper-full " +
                    std::to_string(t.shaper_overflow) + "  at-shutdown " +
                    std::to_string(t.shutdown_dropped) + "  mbufs in use " +
                    std::to_string(r.mbufs.in_use) + "/" + std::to_string(r.mbufs.total) + "\n";
  for (const PortReport& p : r.ports) {
    const PortErrors& e = p.errors;
    if (e.rx_nombuf == 0 && e.rx_errors == 0 && e.tx_errors == 0) continue;
    out += "port " + std::to_string(e.port) + " errors: rx-nombuf " + std::to_string(e.rx_nombuf) +
           "  rx-errors " + std::to_string(e.rx_errors) + "  tx-errors " +
           std::to_string(e.tx_errors) + "\n";
  }
  return out;
}

}  // namespace sluice

#include "control_service.hpp"

#include <chrono>
#include <optional>

#include "counters_wire.hpp"
#include "rule_edits.hpp"
#include "rules_loader.hpp"

namespace sluice {

using nlohmann::json;
using wire::ErrorReply;
using wire::Op;

namespace {

std::string error(const wire::Request& r, wire::ErrorKind kind, std::string message) {
  return wire::encode_error(ErrorReply{r.id, kind, std::move(message)});
}

json flows_json(const std::vector<FlowRate>& flows) {
  json out = json::array();
  for (const FlowRate& f : flows)
    out.push_back({{"rule", f.rule},
                   {"key", f.key},
                   {"packets_per_sec", f.packets_per_sec},
                   {"bits_per_sec", f.bits_per_sec}});
  return out;
}

}  // namespace

void ControlService::set_counters(std::shared_ptr<CountersSource> source) {
  std::lock_guard lock(counters_mu_);
  counters_ = std::move(source);
}

std::shared_ptr<CountersSource> ControlService::counters() const {
  std::lock_guard lock(counters_mu_);
  return counters_;
}

std::string ControlService::stats_reply(uint64_t id) {
  const std::shared_ptr<CountersSource> source = counters();
  const CountersSource::Taken taken = source->get(kCountersMaxAge, kCountersPatience);
  if (!taken.snap)
    return wire::encode_error(ErrorReply{id, wire::ErrorKind::runtime, "the dataplane is not set up yet"});
  std::lock_guard lock(encoded_mu_);
  if (encoded_from_ != source || encoded_seq_ != taken.seq) {
    counters_text_ = encode_counters(*taken.snap);
    encoded_from_ = source;
    encoded_seq_ = taken.seq;
  }
  return wire::encode_result(id, {{"counters", counters_text_}});
}

std::string ControlService::handle(std::string_view body) {
  auto decoded = wire::decode_request(body);
  if (auto* e = std::get_if<ErrorReply>(&decoded)) return wire::encode_error(*e);
  return execute(std::get<wire::Request>(decoded));
}

void ControlService::set_target(RulesTarget* target) {
  std::lock_guard lock(target_mu_);
  target_.store(target);
  if (target != nullptr) had_target_.store(true);
}

std::string ControlService::no_target_reason(const wire::Request& r) const {
  if (had_target_.load())
    return std::string(wire::op_name(r.op)) +
           ": sluiced is stopping: its workers have stopped and its rules no longer change";
  return std::string(wire::op_name(r.op)) +
         ": sluiced is still starting (its dataplane is not up yet): try again in a moment";
}

std::string ControlService::execute(const wire::Request& r, uint64_t received_ns) {
  switch (r.op) {
    case Op::hello: {
      const bool writable = target_.load() != nullptr;
      json ops = json::array();
      for (Op op : wire::all_ops())
        if (writable || !wire::is_write(op)) ops.push_back(wire::op_name(op));
      return wire::encode_result(
          r.id, {{"server", "sluiced"}, {"protocol", wire::kProtocolVersion}, {"ops", ops}, {"writable", writable}});
    }
    case Op::stats:
      return stats_reply(r.id);
    default:
      return with_target(r, received_ns);
  }
}

// Everything that reads or changes the running rules: one at a time (the generation check
// of a write holds until it is applied), and never while the target is being replaced.
std::string ControlService::with_target(const wire::Request& r, uint64_t received_ns) {
  std::lock_guard lock(target_mu_);
  RulesTarget* const target = target_.load();
  // The running rules are copied only for the reads that need them (writes take their own).
  auto running = [&] { return target ? target->rules() : startup_rules_; };
  const uint64_t generation = target ? target->generation() : 0;
  switch (r.op) {
    case Op::rules:
      return wire::encode_result(r.id, {{"rules", dump_rules_yaml(running())}, {"generation", generation}});
    case Op::config_diff: {
      auto next = load_rules_text(r.text, r.filename);
      if (!next) return error(r, wire::ErrorKind::invalid, next.error().message);
      // The refusal a config.load of it would get, with the same kind (a valid file this
      // dataplane cannot run is a runtime refusal, as write() says): a dry run that says
      // "ok" to a load the dataplane refuses is worse than none.
      if (target != nullptr)
        if (Status s = target->check(*next); !s)
          return error(r, wire::ErrorKind::runtime, s.error().message);
      return wire::encode_diff_result(r.id, diff_rules(running(), *next), generation);
    }
    case Op::flows_top: {
      if (target == nullptr) return error(r, wire::ErrorKind::runtime, no_target_reason(r));
      auto flows = target->top_flows(r.top);
      if (!flows) return error(r, wire::ErrorKind::runtime, flows.error().message);
      return wire::encode_result(r.id, {{"flows", flows_json(*flows)}});
    }
    case Op::rule_add:
    case Op::rule_set:
    case Op::rule_del:
    case Op::config_load:
      return write(r, target, received_ns);
    default:
      return error(r, wire::ErrorKind::usage, "unknown op");
  }
}

std::string ControlService::write(const wire::Request& r, RulesTarget* target,
                                  uint64_t received_ns) {
  if (target == nullptr) return error(r, wire::ErrorKind::runtime, no_target_reason(r));
  const uint64_t generation = target->generation();
  if (r.expect_generation && *r.expect_generation != generation)
    return error(r, wire::ErrorKind::conflict,
                 "rules changed since generation " + std::to_string(*r.expect_generation) +
                     " (now " + std::to_string(generation) + ")");
  Result<RuleSet> next = make_error("");
  if (r.op == Op::config_load) {
    next = load_rules_text(r.text, r.filename);  // the running rules play no part
  } else {
    const RuleSet current = target->rules();
    switch (r.op) {
      case Op::rule_add: next = add_rules(current, r.text, r.filename, r.before); break;
      case Op::rule_set: next = set_rule_fields(current, r.name, r.fields); break;
      default: next = delete_rule(current, r.name); break;
    }
  }
  if (!next) return error(r, wire::ErrorKind::invalid, next.error().message);
  auto applied = target->apply(std::move(next).value());
  if (!applied) return error(r, wire::ErrorKind::runtime, applied.error().message);
  // apply() returns once every worker has left the old rules behind: from here on each of
  // them runs the change.
  std::optional<uint64_t> applied_us;
  if (received_ns != 0) {
    const uint64_t now = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now().time_since_epoch())
                                      .count());
    applied_us = now > received_ns ? (now - received_ns) / 1000 : 0;
  }
  return wire::encode_diff_result(r.id, *applied, target->generation(), applied_us);
}

}  // namespace sluice

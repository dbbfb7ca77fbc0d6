#include "control_service.hpp"

#include "counters_wire.hpp"
#include "rule_edits.hpp"
#include "rules_loader.hpp"

namespace sluice {

using nlohmann::json;
using wire::ErrorKind;
using wire::ErrorReply;
using wire::Op;

namespace {

std::string error(const wire::Request& r, ErrorKind kind, std::string message) {
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

void ControlService::publish(const CountersSnapshot& snap) {
  std::string text = encode_counters(snap);
  std::lock_guard lock(counters_mu_);
  counters_text_ = std::move(text);
  published_ = true;
}

std::string ControlService::handle(std::string_view body) {
  auto decoded = wire::decode_request(body);
  if (auto* e = std::get_if<ErrorReply>(&decoded)) return wire::encode_error(*e);
  return execute(std::get<wire::Request>(decoded));
}

std::string ControlService::execute(const wire::Request& r) {
  switch (r.op) {
    case Op::hello: {
      json ops = json::array();
      for (Op op : wire::all_ops())
        if (target_ != nullptr || !wire::is_write(op)) ops.push_back(wire::op_name(op));
      return wire::encode_result(r.id, {{"server", "sluiced"},
                                        {"protocol", wire::kProtocolVersion},
                                        {"ops", ops},
                                        {"writable", target_ != nullptr},
                                        {"generation", target_ ? target_->generation() : 0}});
    }
    case Op::stats: {
      std::lock_guard lock(counters_mu_);
      if (!published_) return error(r, ErrorKind::runtime, "the dataplane is not set up yet");
      return wire::encode_result(r.id, {{"counters", counters_text_}});
    }
    case Op::rules: {
      const RuleSet rules = target_ ? target_->rules() : startup_rules_;
      return wire::encode_result(r.id, {{"rules", dump_rules_yaml(rules)},
                                        {"generation", target_ ? target_->generation() : 0}});
    }
    case Op::config_diff: {
      auto next = load_rules_text(r.text, r.filename);
      if (!next) return error(r, ErrorKind::invalid, next.error().message);
      const RuleSet running = target_ ? target_->rules() : startup_rules_;
      return wire::encode_result(r.id, {{"diff", wire::diff_to_json(diff_rules(running, *next))},
                                        {"generation", target_ ? target_->generation() : 0}});
    }
    case Op::flows_top: {
      if (target_ == nullptr)
        return error(r, ErrorKind::unsupported, "this sluiced does not report flows");
      auto flows = target_->top_flows(r.top);
      if (!flows) return error(r, ErrorKind::runtime, flows.error().message);
      return wire::encode_result(r.id, {{"flows", flows_json(*flows)}});
    }
    case Op::rule_add:
    case Op::rule_set:
    case Op::rule_del:
    case Op::config_load:
      return write(r);
  }
  return error(r, ErrorKind::usage, "unknown op");
}

std::string ControlService::write(const wire::Request& r) {
  if (target_ == nullptr)
    return error(r, ErrorKind::unsupported,
                 std::string(wire::op_name(r.op)) +
                     ": this sluiced cannot change its rules while it runs (restart it with "
                     "another --config)");
  std::lock_guard lock(write_mu_);
  const uint64_t generation = target_->generation();
  if (r.expect_generation && *r.expect_generation != generation)
    return error(r, ErrorKind::conflict,
                 "rules changed since generation " + std::to_string(*r.expect_generation) +
                     " (now " + std::to_string(generation) + ")");
  const RuleSet current = target_->rules();
  Result<RuleSet> next = make_error("");
  switch (r.op) {
    case Op::rule_add: next = add_rules(current, r.text, r.filename, r.before); break;
    case Op::rule_set: next = set_rule_fields(current, r.name, r.fields); break;
    case Op::rule_del: next = delete_rule(current, r.name); break;
    default: next = load_rules_text(r.text, r.filename); break;
  }
  if (!next) return error(r, ErrorKind::invalid, next.error().message);
  auto applied = target_->apply(std::move(next).value());
  if (!applied) return error(r, ErrorKind::runtime, applied.error().message);
  return wire::encode_result(r.id, {{"diff", wire::diff_to_json(*applied)},
                                    {"generation", target_->generation()}});
}

}  // namespace sluice

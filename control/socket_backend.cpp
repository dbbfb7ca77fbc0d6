#include "socket_backend.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "control_frame.hpp"
#include "counters_wire.hpp"
#include "rules_loader.hpp"

namespace sluice::ctl {

using nlohmann::json;

namespace {

// sluiced answers reads from a copy it keeps: anything slower than this is a stuck server.
constexpr int kReadTimeoutMs = 5000;
// A write parses and validates a rules text of up to 16 MiB and waits for every worker.
constexpr int kWriteTimeoutMs = 60000;
// A reply carries at most a rules file (of at most 16 MiB as text) and some JSON around it.
constexpr size_t kMaxReplyBytes = size_t{64} << 20;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The protocol's finer error kinds, as the exit class they deserve.
ErrorKind kind_of(wire::ErrorKind kind) {
  return kind == wire::ErrorKind::usage || kind == wire::ErrorKind::invalid ? ErrorKind::invalid_input
                                                                           : ErrorKind::runtime;
}

Result<AppliedChange> applied_change(const Result<json>& a) {
  if (!a) return Result<AppliedChange>(a.error());
  auto gen = a->find("generation");
  auto diff_j = a->find("diff");
  if (gen == a->end() || !gen->is_number_unsigned() || diff_j == a->end())
    return Result<AppliedChange>(make_error("sluiced: the reply has no diff or generation"));
  auto diff = wire::diff_from_json(*diff_j);
  if (!diff) return Result<AppliedChange>(make_error("sluiced: " + diff.error().message));
  AppliedChange change{*diff, gen->get<uint64_t>(), std::nullopt};
  if (auto us = a->find("applied_us"); us != a->end() && us->is_number_unsigned())
    change.applied_us = us->get<uint64_t>();
  return change;
}

}  // namespace

Result<json> SocketBackend::ask(wire::Request request, int timeout_ms) const {
  const std::string where = "control socket " + path_ + ": ";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof addr.sun_path)
    return Result<json>(invalid_input(where + "a socket path must be 1 to " +
                                      std::to_string(sizeof addr.sun_path - 1) + " bytes long"));
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Result<json>(make_error(where + "socket: " + std::strerror(errno)));
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return Result<json>(make_error(where + "cannot connect: " + std::strerror(errno) +
                                   " (is sluiced running with --control " + path_ + "?)"));
  request.id = 1;
  const std::string frame = wire::encode_frame(wire::encode_request(request));
  const int64_t deadline = now_ms() + timeout_ms;
  auto wait_for = [&](short events) -> bool {
    for (;;) {
      const int64_t left = deadline - now_ms();
      if (left <= 0) return false;
      pollfd p{fd.get(), events, 0};
      const int ready = poll(&p, 1, int(left));
      if (ready < 0 && errno == EINTR) continue;
      return ready > 0;
    }
  };
  const auto late = [&] {
    return Result<json>(make_error(where + "no reply within " + std::to_string(timeout_ms) + " ms"));
  };
  for (std::string_view rest = frame; !rest.empty();) {
    if (!wait_for(POLLOUT)) return late();
    const ssize_t n = send(fd.get(), rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // the server may have refused with a reply: read it below
    rest.remove_prefix(size_t(n));
  }
  wire::FrameReader reader(kMaxReplyBytes);
  std::string got_prefix;  // the first bytes, to recognise an older sluiced
  char buf[65536];
  std::optional<std::string> body;
  while (!body) {
    if (!wait_for(POLLIN)) return late();
    const ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Result<json>(make_error(where + "cannot read the reply: " + std::strerror(errno)));
    if (n == 0) {
      if (got_prefix.rfind("error ", 0) == 0 || got_prefix.rfind("ok\n", 0) == 0)
        return Result<json>(make_error(where + "this sluiced speaks the old control protocol "
                                               "(v1, read-only); upgrade it"));
      return Result<json>(make_error(where + "sluiced closed the connection without a reply"));
    }
    if (got_prefix.size() < 16) got_prefix.append(buf, std::min<size_t>(size_t(n), 16));
    reader.feed(std::string_view(buf, size_t(n)));
    if (!reader.error().empty()) {
      if (got_prefix.rfind("error ", 0) == 0 || got_prefix.rfind("ok\n", 0) == 0)
        return Result<json>(make_error(where + "this sluiced speaks the old control protocol "
                                               "(v1, read-only); upgrade it"));
      return Result<json>(make_error(where + "not a control protocol v2 reply: " + reader.error()));
    }
    body = reader.next();
  }
  auto reply = wire::decode_reply(*body);
  if (!reply) return Result<json>(make_error(where + reply.error().message));
  if (!reply->ok)
    return Result<json>(make_error("sluiced: " + reply->error.message, kind_of(reply->error.kind)));
  return std::move(reply->result);
}

Result<CountersSnapshot> SocketBackend::stats() {
  wire::Request r;
  r.op = wire::Op::stats;
  auto a = ask(r, kReadTimeoutMs);
  if (!a) return Result<CountersSnapshot>(a.error());
  auto text = a->find("counters");
  if (text == a->end() || !text->is_string())
    return Result<CountersSnapshot>(make_error("sluiced: the stats reply has no counters"));
  auto snap = decode_counters(text->get<std::string>());
  if (!snap) return Result<CountersSnapshot>(make_error("control socket " + path_ + ": " + snap.error().message));
  return std::move(snap).value();
}

Result<RuleSet> SocketBackend::rules() {
  wire::Request r;
  r.op = wire::Op::rules;
  auto a = ask(r, kReadTimeoutMs);
  if (!a) return Result<RuleSet>(a.error());
  auto text = a->find("rules");
  if (text == a->end() || !text->is_string())
    return Result<RuleSet>(make_error("sluiced: the rules reply has no rules"));
  auto rules = load_rules_text(text->get<std::string>(), "rules from " + path_);
  if (!rules) return Result<RuleSet>(rules.error());
  return std::move(rules).value();
}

Result<AppliedChange> SocketBackend::write(wire::Request r, const WriteOptions& w) const {
  r.expect_generation = w.expect_generation;
  return applied_change(ask(std::move(r), kWriteTimeoutMs));
}

Result<AppliedChange> SocketBackend::add_rules(const std::string& text, const std::string& filename,
                                               const std::string& before, const WriteOptions& w) {
  wire::Request r;
  r.op = wire::Op::rule_add;
  r.text = text;
  r.filename = filename;
  r.before = before;
  return write(std::move(r), w);
}

Result<AppliedChange> SocketBackend::set_rule(
    const std::string& name, const std::map<std::string, std::optional<std::string>>& fields,
    const WriteOptions& w) {
  wire::Request r;
  r.op = wire::Op::rule_set;
  r.name = name;
  r.fields = fields;
  return write(std::move(r), w);
}

Result<AppliedChange> SocketBackend::delete_rule(const std::string& name, const WriteOptions& w) {
  wire::Request r;
  r.op = wire::Op::rule_del;
  r.name = name;
  return write(std::move(r), w);
}

Result<AppliedChange> SocketBackend::load_config(const std::string& text, const std::string& filename,
                                                 const WriteOptions& w) {
  wire::Request r;
  r.op = wire::Op::config_load;
  r.text = text;
  r.filename = filename;
  return write(std::move(r), w);
}

Result<RulesDiff> SocketBackend::diff_config(const std::string& text, const std::string& filename) {
  wire::Request r;
  r.op = wire::Op::config_diff;
  r.text = text;
  r.filename = filename;
  auto a = ask(std::move(r), kWriteTimeoutMs);
  if (!a) return Result<RulesDiff>(a.error());
  auto d = a->find("diff");
  if (d == a->end()) return Result<RulesDiff>(make_error("sluiced: the reply has no diff"));
  auto diff = wire::diff_from_json(*d);
  if (!diff) return Result<RulesDiff>(make_error("sluiced: " + diff.error().message));
  return std::move(diff).value();
}

Result<std::vector<FlowRate>> SocketBackend::top_flows(const TopFlowsQuery& query) {
  wire::Request r;
  r.op = wire::Op::flows_top;
  r.top = query;
  auto a = ask(std::move(r), kReadTimeoutMs);
  using A = Result<std::vector<FlowRate>>;
  if (!a) return A(a.error());
  auto flows = a->find("flows");
  if (flows == a->end() || !flows->is_array()) return A(make_error("sluiced: the reply has no flows"));
  std::vector<FlowRate> out;
  for (const json& f : *flows) {
    if (!f.is_object()) return A(make_error("sluiced: a malformed flow"));
    auto rule = f.find("rule"), key = f.find("key"), pps = f.find("packets_per_sec"),
         bps = f.find("bits_per_sec");
    if (rule == f.end() || !rule->is_string() || key == f.end() || !key->is_string() ||
        pps == f.end() || !pps->is_number() || bps == f.end() || !bps->is_number())
      return A(make_error("sluiced: a malformed flow"));
    out.push_back({rule->get<std::string>(), key->get<std::string>(), pps->get<double>(),
                   bps->get<double>()});
  }
  return out;
}

}  // namespace sluice::ctl

#include "metrics_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "counters_prometheus.hpp"

namespace sluice {

namespace {

constexpr size_t kMaxHeadBytes = 8192;
constexpr int kRequestTimeoutMs = 2000;

std::string http_response(const char* status, std::string_view content_type,
                          std::string_view body, bool head_only, const char* extra = "") {
  std::string out = "HTTP/1.1 ";
  out += status;
  out += "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size());
  out += "\r\nConnection: close\r\n";
  out += extra;
  out += "\r\n";
  if (!head_only) out += body;
  return out;
}

// Splits "host:port" / "[v6]:port" into its parts; false if it is neither.
bool split_address(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->front() == '[') {
    if (host->size() < 3 || host->back() != ']') return false;
    *host = host->substr(1, host->size() - 2);
  } else if (host->find(':') != std::string::npos) {
    return false;  // an IPv6 address needs its brackets
  }
  for (char c : *port)
    if (c < '0' || c > '9') return false;
  return port->size() <= 5 && std::stoul(*port) <= 65535;
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address) {
  const std::string where = "--metrics " + address + ": ";
  std::string host, port;
  if (!split_address(address, &host, &port))
    return make_error(where + "expected HOST:PORT (e.g. 127.0.0.1:9100 or [::1]:9100)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(where + "cannot resolve " + host + ": " + gai_strerror(rc));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return make_error(where + "cannot listen: " + why);

  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const uint16_t bound_port = ntohs(bound.ss_family == AF_INET6
                                        ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  std::unique_ptr<MetricsServer> metrics(new MetricsServer(bound_port));
  auto server = StreamServer::start(fd, [m = metrics.get()](int client) { m->serve_one(client); });
  if (!server) return make_error(where + server.error().message);
  metrics->server_ = std::move(server).value();
  return metrics;
}

void MetricsServer::publish(const CountersSnapshot& snap) {
  std::lock_guard lock(mu_);
  snapshot_ = snap;
  published_ = true;
}

std::string MetricsServer::respond(std::string_view head) const {
  constexpr std::string_view kText = "text/plain; charset=utf-8";
  const size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.substr(sp2 + 1).rfind("HTTP/", 0) != 0)
    return http_response("400 Bad Request", kText, "not an HTTP request\n", false);
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only)
    return http_response("405 Method Not Allowed", kText, "only GET and HEAD\n", false,
                         "Allow: GET, HEAD\r\n");
  if (target != "/metrics")
    return http_response("404 Not Found", kText, "sluiced serves its counters at /metrics\n",
                         head_only);
  std::string body;
  {
    std::lock_guard lock(mu_);
    if (!published_)
      return http_response("503 Service Unavailable", kText, "the dataplane is not set up yet\n",
                           head_only);
    body = counters_to_prometheus(snapshot_);
  }
  return http_response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body, head_only);
}

void MetricsServer::serve_one(int fd) const {
  std::string why;
  const std::string head = read_until(fd, "\r\n\r\n", kMaxHeadBytes, kRequestTimeoutMs, &why);
  if (!why.empty()) {
    send_all(fd, http_response(why.find("longer") != std::string::npos
                                   ? "431 Request Header Fields Too Large"
                                   : "408 Request Timeout",
                               "text/plain; charset=utf-8", why + "\n", false));
    return;
  }
  if (head.empty()) return;  // connected and hung up
  send_all(fd, respond(head));
}

}  // namespace sluice

#include "control_loop.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace sluice {

namespace {

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = ~uint64_t{0};
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxReadPerEvent = 16 * kReadChunk;  // then the next connection's turn
constexpr int kFramesPerTurn = 16;                    // pipelined requests answered per turn
constexpr int kLingerMs = 1000;  // after an error reply: time to read it before the close
constexpr int kTickMs = 20;      // deadlines are checked this often
constexpr int kAcceptPauseMs = 100;  // out of file descriptors: accept again after this

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// Gives the calling thread SCHED_FIFO at `rt_priority`, or else `nice` (ControlLimits). On
// Linux both are per thread: pthread_setschedparam on this thread, setpriority on a thread id
// (setpriority(2), "Notes"). Says once on stderr what it could not have.
void set_thread_priority(int rt_priority, int nice) {
  static std::atomic<bool> said{false};
  if (rt_priority > 0) {
    sched_param param{};
    param.sched_priority = rt_priority;
    const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
    if (rc == 0) return;
    if (!said.exchange(true))
      std::fprintf(stderr,
                   "sluiced: control socket threads cannot run SCHED_FIFO %d (%s): nice %d "
                   "instead\n",
                   rt_priority, std::strerror(rc), nice);
  }
  if (nice == 0) return;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) == 0) return;
  if (!said.exchange(true))
    std::fprintf(stderr,
                 "sluiced: control socket threads keep their priority (nice %d: %s); rule "
                 "changes may wait for a busy worker's time slice\n",
                 nice, std::strerror(errno));
}

// Best effort, never blocking: for a connection refused at once.
void send_and_close(int fd, const wire::ErrorReply& e) {
  const std::string frame = wire::encode_frame(wire::encode_error(e));
  (void)!send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
}

}  // namespace

struct ControlLoop::Connection {
  enum class State { reading, working, writing, draining };
  int fd = -1;
  uint64_t id = 0;
  wire::FrameReader reader;
  std::string out;
  size_t out_at = 0;
  State state = State::reading;
  bool close_after_write = false;
  int64_t deadline_ms = 0;
  size_t counted_bytes = 0;  // of the frame under way, in pending_bytes_
  uint32_t events = 0;
  bool queued = false;  // in ready_ (has pipelined frames left)
  RequestTiming timing;  // of the reply being written, if timed
  bool timed = false;
  bool hung_up = false;  // while working: closed once the worker thread has let go of fd
};

Result<std::unique_ptr<ControlLoop>> ControlLoop::start(int listen_fd, ControlService* service,
                                                        ControlLimits limits) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  const int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep < 0 || wake < 0) {
    const std::string why = std::strerror(errno);
    if (ep >= 0) close(ep);
    if (wake >= 0) close(wake);
    close(listen_fd);
    return make_error("cannot set up the control socket's event loop: " + why);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
  std::unique_ptr<ControlLoop> loop(new ControlLoop(listen_fd, ep, wake, service, limits));
  loop->worker_ = std::thread([l = loop.get()] { l->work(); });
  loop->thread_ = std::thread([l = loop.get()] { l->run(); });
  return loop;
}

ControlLoop::ControlLoop(int listen_fd, int epoll_fd, int wake_fd, ControlService* service,
                         ControlLimits limits)
    : listen_fd_(listen_fd), epoll_fd_(epoll_fd), wake_fd_(wake_fd), service_(service),
      limits_(limits) {}

ControlLoop::~ControlLoop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  if (worker_.joinable()) worker_.join();
  for (auto& [id, c] : conns_) close(c->fd);
  close(listen_fd_);
  close(epoll_fd_);
  close(wake_fd_);
}

void ControlLoop::work() {
  set_thread_priority(limits_.rt_priority, limits_.thread_nice);
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const uint64_t started_ns = now_ns();
    std::string reply = service_->execute(job.request, job.read_ns);
    const uint64_t executed_ns = now_ns();
    Done done = send_reply(job, std::move(reply),
                           {job.request.op, started_ns - job.read_ns, executed_ns - job.read_ns,
                            job.read_ns});
    // Sent whole, nothing else buffered and no event seen meanwhile: the loop needs nothing
    // now, and takes the Done at its next turn (the client's next request wakes it: the
    // connection stayed on EPOLLIN).
    bool wake = !done.frame.empty() || done.send_failed || job.wake_loop;
    {
      std::lock_guard lock(mu_);
      done_.push_back(std::move(done));
      done_waiting_.store(true, std::memory_order_release);
      // Under the same lock as the loop's request for a wake-up: neither is missed.
      auto asked = std::find(wake_asked_.begin(), wake_asked_.end(), job.conn_id);
      if (asked != wake_asked_.end()) {
        wake_asked_.erase(asked);
        wake = true;
      }
    }
    if (wake) {
      const uint64_t one = 1;
      (void)!write(wake_fd_, &one, sizeof one);
    }
  }
}

ControlLoop::Done ControlLoop::send_reply(const Job& job, std::string body, RequestTiming timing) {
  Done d{job.conn_id, wire::encode_frame(body), 0, false, timing};
  body = std::string();
  while (d.sent < d.frame.size()) {
    const ssize_t n = send(job.fd, d.frame.data() + d.sent, d.frame.size() - d.sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return d;  // the loop goes on
    if (n < 0) {
      d.send_failed = true;
      return d;
    }
    d.sent += size_t(n);
  }
  d.frame = std::string();
  d.timing.replied_ns = now_ns() - timing.replied_ns;
  return d;
}

void ControlLoop::run() {
  set_thread_priority(limits_.rt_priority, limits_.thread_nice);
  std::vector<epoll_event> events(256);
  std::vector<uint64_t> ready;
  int64_t next_tick = now_ms() + kTickMs;
  for (;;) {
    const int timeout = ready.empty() ? kTickMs : 0;
    const int n = epoll_wait(epoll_fd_, events.data(), int(events.size()), timeout);
    int64_t now = now_ms();
    // Before the events: one of them may be for a connection the worker thread gave back.
    if (done_waiting_.load(std::memory_order_acquire)) finish_jobs(now);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[size_t(i)].data.u64;
      if (id == kListenId) {
        accept_all(now);
        continue;
      }
      if (id == kWakeId) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof count);
        {
          std::lock_guard lock(mu_);
          if (stopping_) return;
        }
        finish_jobs(now);
        continue;
      }
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      Connection& c = *it->second;
      const uint32_t ev = events[size_t(i)].events;
      const bool reads = c.state == Connection::State::reading ||
                         c.state == Connection::State::draining;
      if ((ev & EPOLLOUT) && c.state == Connection::State::writing) on_writable(c, now);
      else if (reads && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) on_readable(c, now);
      else if ((ev & (EPOLLHUP | EPOLLERR)) && c.state == Connection::State::working) {
        // The worker thread may be sending on fd: close it once its Done is taken.
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
        c.hung_up = true;
      } else if (ev & (EPOLLHUP | EPOLLERR)) close_connection(id);
      else if ((ev & EPOLLIN) && c.state == Connection::State::working) on_input_while_working(c);
    }
    // Connections with pipelined requests left over from their last turn.
    std::vector<uint64_t> turn;
    turn.swap(ready);
    for (uint64_t id : turn) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      it->second->queued = false;
      next_request(*it->second, now);
    }
    for (auto& [id, c] : conns_)
      if (c->queued) ready.push_back(id);
    now = now_ms();
    if (now >= next_tick) {
      expire(now);
      next_tick = now + kTickMs;
    }
  }
}

void ControlLoop::accept_all(int64_t now) {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop listening for a while instead of spinning on the backlog.
        epoll_event ev{};
        ev.data.u64 = kListenId;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
        accept_paused_until_ms_ = now + kAcceptPauseMs;
      }
      return;
    }
    ucred peer{};
    socklen_t len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
        (peer.uid != geteuid() && peer.uid != 0)) {
      send_and_close(fd, {0, wire::ErrorKind::usage,
                          "permission denied: uid " + std::to_string(peer.uid) +
                              " is neither the user sluiced runs as nor root"});
      continue;
    }
    if (conns_.size() >= limits_.max_connections) {
      send_and_close(fd, {0, wire::ErrorKind::runtime,
                          "too many connections (" + std::to_string(limits_.max_connections) +
                              "); try again later"});
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->id = next_id_++;
    c->deadline_ms = now + limits_.idle_timeout_ms;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c->id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      continue;
    }
    c->events = EPOLLIN;
    conns_.emplace(c->id, std::move(c));
    open_.store(conns_.size());
  }
}

void ControlLoop::watch(Connection& c, uint32_t events) {
  if (c.events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.events = events;
}

void ControlLoop::close_connection(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  pending_bytes_ -= it->second->counted_bytes;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);
  close(it->second->fd);
  conns_.erase(it);
  open_.store(conns_.size());
}

void ControlLoop::on_readable(Connection& c, int64_t now) {
  char buf[kReadChunk];
  size_t taken = 0;
  while (taken < kMaxReadPerEvent) {
    const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) return close_connection(c.id);  // hung up (a request half sent is dropped)
    taken += size_t(n);
    if (c.state == Connection::State::draining) continue;
    if (c.state != Connection::State::reading) break;
    if (c.reader.pending_bytes() == 0 && !c.reader.announced())
      c.deadline_ms = now + limits_.request_deadline_ms;  // a request begins
    c.reader.feed(std::string_view(buf, size_t(n)));
    if (!c.reader.error().empty())
      return reply(c, wire::encode_error({0, wire::ErrorKind::usage, c.reader.error()}), now, true);
    if (c.reader.announced() && c.counted_bytes == 0) {
      const size_t want = *c.reader.announced();
      if (pending_bytes_ + want > limits_.max_pending_bytes)
        return reply(c, wire::encode_error({0, wire::ErrorKind::runtime,
                                            "busy: other requests hold " +
                                                std::to_string(pending_bytes_) +
                                                " bytes; try again"}),
                     now, true);
      c.counted_bytes = want;
      pending_bytes_ += want;
    }
    if (c.reader.announced() && c.reader.pending_bytes() >= *c.reader.announced()) break;
  }
  if (c.state == Connection::State::reading) next_request(c, now);
}

void ControlLoop::next_request(Connection& c, int64_t now) {
  for (int turn = 0; turn < kFramesPerTurn && c.state == Connection::State::reading; ++turn) {
    std::optional<std::string> body = c.reader.next();
    if (!body) {
      if (c.reader.pending_bytes() == 0 && !c.reader.announced())
        c.deadline_ms = now + limits_.idle_timeout_ms;
      watch(c, EPOLLIN);
      return;
    }
    pending_bytes_ -= c.counted_bytes;
    c.counted_bytes = 0;
    auto decoded = wire::decode_request(*body);
    body.reset();
    if (auto* e = std::get_if<wire::ErrorReply>(&decoded)) {
      reply(c, wire::encode_error(*e), now);
      continue;
    }
    wire::Request& request = std::get<wire::Request>(decoded);
    if (ControlService::is_quick(request)) {
      reply(c, service_->execute(request), now);
      continue;
    }
    // EPOLLIN stays on: the worker thread sends the reply and gives the connection back
    // without a wake-up, and the client's next request is the loop's next event.
    c.state = Connection::State::working;
    const bool more = c.reader.pending_bytes() != 0 || c.reader.announced();
    {
      std::lock_guard lock(mu_);
      jobs_.push_back({c.id, c.fd, std::move(request), now_ns(), more});
    }
    cv_.notify_one();
    return;
  }
  // Requests still buffered: answered on the next turn, after the other connections'.
  if (c.state == Connection::State::reading) c.queued = true;
}

void ControlLoop::reply(Connection& c, std::string body, int64_t now, bool then_close) {
  c.out = wire::encode_frame(body);
  c.out_at = 0;
  c.state = Connection::State::writing;
  c.close_after_write = then_close;
  c.deadline_ms = now + limits_.reply_deadline_ms;
  flush(c, now);
}

void ControlLoop::on_writable(Connection& c, int64_t now) {
  flush(c, now);
  if (c.state == Connection::State::reading) next_request(c, now);
}

void ControlLoop::flush(Connection& c, int64_t now) {
  while (c.out_at < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.out_at, c.out.size() - c.out_at,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch(c, EPOLLOUT);
      return;
    }
    if (n < 0) {
      c.state = Connection::State::draining;  // closed by expire; the peer has gone
      c.deadline_ms = now;
      return;
    }
    c.out_at += size_t(n);
  }
  c.out.clear();
  c.out.shrink_to_fit();
  c.out_at = 0;
  if (c.timed) {
    c.timed = false;
    c.timing.replied_ns = now_ns() - c.timing.replied_ns;
    record_timing(c.timing);
  }
  if (c.close_after_write) {
    // Let the client read the error before the close (an unread request would reset it).
    shutdown(c.fd, SHUT_WR);
    c.state = Connection::State::draining;
    c.deadline_ms = now + kLingerMs;
    pending_bytes_ -= c.counted_bytes;
    c.counted_bytes = 0;
    watch(c, EPOLLIN);
    return;
  }
  c.state = Connection::State::reading;
  c.deadline_ms = now + limits_.idle_timeout_ms;
  watch(c, EPOLLIN);
}

// Bytes came while the worker thread has the connection: the loop cannot read them until its
// Done, so it stops watching (EPOLLIN is level-triggered: it would report them on every turn)
// and asks for a wake-up with that Done, unless the Done is here already.
void ControlLoop::on_input_while_working(Connection& c) {
  const uint64_t id = c.id;  // finish_jobs may close connections: c is not used after it
  {
    std::lock_guard lock(mu_);
    const bool done = std::any_of(done_.begin(), done_.end(),
                                  [&](const Done& d) { return d.conn_id == id; });
    if (!done) {
      wake_asked_.push_back(id);
      watch(c, 0);
      return;
    }
  }
  const int64_t now = now_ms();
  finish_jobs(now);  // c is reading now (or writing the rest of its reply, or gone)
  auto it = conns_.find(id);
  if (it != conns_.end() && it->second->state == Connection::State::reading)
    on_readable(*it->second, now);
}

void ControlLoop::finish_jobs(int64_t now) {
  std::vector<Done> done;
  {
    std::lock_guard lock(mu_);
    done.swap(done_);
    done_waiting_.store(false, std::memory_order_relaxed);
  }
  for (Done& d : done) {
    auto it = conns_.find(d.conn_id);
    if (it == conns_.end() || it->second->state != Connection::State::working) continue;
    Connection& c = *it->second;
    if (c.hung_up) {
      // A reply sent whole before the client hung up (a client that reads its reply and
      // closes at once can be seen gone before the Done is taken): a request served, timed.
      if (d.frame.empty() && !d.send_failed) record_timing(d.timing);
      close_connection(c.id);
      continue;
    }
    if (d.send_failed) {
      c.state = Connection::State::draining;  // closed by expire, as in flush()
      c.deadline_ms = now;
      continue;
    }
    if (d.frame.empty()) {
      // Sent whole by the worker thread.
      watch(c, EPOLLIN);  // on again if input came meanwhile (on_input_while_working)
      c.state = Connection::State::reading;
      c.deadline_ms = now + limits_.idle_timeout_ms;
      record_timing(d.timing);
      next_request(c, now);
      continue;
    }
    c.timing = d.timing;  // its replied_ns holds when the request was read, until flush() ends
    c.timed = true;
    c.out = std::move(d.frame);
    c.out_at = d.sent;
    c.state = Connection::State::writing;
    c.close_after_write = false;
    c.deadline_ms = now + limits_.reply_deadline_ms;
    flush(c, now);
    if (c.state == Connection::State::reading) next_request(c, now);
  }
}

void ControlLoop::record_timing(const RequestTiming& timing) {
  std::lock_guard lock(timings_mu_);
  if (timings_.size() < kTimingsKept) timings_.push_back(timing);
}

std::vector<RequestTiming> ControlLoop::timings() const {
  std::lock_guard lock(timings_mu_);
  return timings_;
}

void ControlLoop::expire(int64_t now) {
  if (accept_paused_until_ms_ != 0 && now >= accept_paused_until_ms_) {
    accept_paused_until_ms_ = 0;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  }
  std::vector<uint64_t> late;
  for (auto& [id, c] : conns_)
    if (c->state != Connection::State::working && now >= c->deadline_ms) late.push_back(id);
  for (uint64_t id : late) {
    Connection& c = *conns_.at(id);
    if (c.state == Connection::State::reading && (c.reader.pending_bytes() != 0 || c.reader.announced())) {
      reply(c, wire::encode_error({0, wire::ErrorKind::usage,
                                   "the request was not complete within " +
                                       std::to_string(limits_.request_deadline_ms) + " ms"}),
            now, true);
      if (c.state == Connection::State::draining || c.state == Connection::State::writing) continue;
    }
    close_connection(id);
  }
}

}  // namespace sluice

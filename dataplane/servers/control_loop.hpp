// The control socket's event loop (control_server.hpp): one thread, epoll, non-blocking
// connections with a buffer, a deadline and a frame reader each; and one worker thread for
// the requests that take longer than a copy (ControlService::is_quick). The worker thread
// sends its reply itself when the socket takes it whole, and gives the connection back to
// the loop without waking it (the loop takes it back at its next event): a change's reply then costs no wake-up of the loop, which on
// the benchmark's two CPUs preempts a busy-polling worker (docs/BENCHMARKS.md).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control_frame.hpp"
#include "control_service.hpp"
#include "result.hpp"

namespace sluice {

struct ControlLimits {
  size_t max_connections = 1024;                // beyond: an error reply, then closed
  size_t max_pending_bytes = size_t{64} << 20;  // frame bytes announced, all connections
  int request_deadline_ms = 5000;               // from a request's first byte to its last
  int reply_deadline_ms = 5000;                 // to take a whole reply
  int idle_timeout_ms = 60000;                  // open with no request under way
  // The nice value of the loop's two threads (Linux: a per-thread value), 0 to leave it. A
  // negative one lets a request's wake-up preempt a busy-polling worker sharing the CPU,
  // instead of waiting out the worker's slice. Needs CAP_SYS_NICE: without it the threads
  // keep their priority and say so once on stderr.
  int thread_nice = 0;
  // Above it: SCHED_FIFO at this priority (1-99; 0 to leave the policy) for the loop's two
  // threads, tried first. They sleep almost always, a request's wake-up then preempts a
  // busy-polling worker at once, and the kernel's RT throttling (sched_rt_runtime_us) bounds
  // what a runaway could take. Needs CAP_SYS_NICE (or RLIMIT_RTPRIO): without it, thread_nice.
  int rt_priority = 0;
};

// Where a request handed to the worker thread spent its time, measured by the loop
// (steady clock, ns): from its last byte read to the worker taking it, to its reply built
// (the apply, for a write: every worker runs the new rules by then), to the reply's last byte
// given to the socket. Kept per op: a 1,000-rule config.load takes milliseconds to parse, a
// rule.set microseconds, and one pooled percentile would hide either.
struct RequestTiming {
  wire::Op op = wire::Op::hello;
  uint64_t queued_ns = 0, executed_ns = 0, replied_ns = 0;
};

class ControlLoop {
 public:
  // Takes `listen_fd` (bound, listening); serves until destroyed.
  static Result<std::unique_ptr<ControlLoop>> start(int listen_fd, ControlService* service,
                                                    ControlLimits limits);
  ~ControlLoop();
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  size_t connections() const { return open_.load(); }
  // The timings of the first kTimingsKept requests handed to the worker thread (writes,
  // rules, diffs, flows), in the order their replies were sent.
  static constexpr size_t kTimingsKept = 1 << 20;
  std::vector<RequestTiming> timings() const;

 private:
  struct Connection;
  struct Job {
    uint64_t conn_id;
    int fd;  // the loop leaves it open until the Done is taken
    wire::Request request;
    uint64_t read_ns;
    // The loop holds bytes of another request of this connection: it must be woken to read
    // them, as no epoll event will say so.
    bool wake_loop;
  };
  struct Done {
    uint64_t conn_id;
    std::string frame;  // the reply's frame
    size_t sent = 0;    // bytes of it the worker thread gave the socket
    bool send_failed = false;  // the peer has gone
    // When the whole frame is sent: its timing, complete. Else replied_ns is the request's
    // read time.
    RequestTiming timing;
  };

  ControlLoop(int listen_fd, int epoll_fd, int wake_fd, ControlService* service,
              ControlLimits limits);
  void run();
  void work();
  void accept_all(int64_t now_ms);
  void on_readable(Connection& c, int64_t now_ms);
  void on_writable(Connection& c, int64_t now_ms);
  void next_request(Connection& c, int64_t now_ms);
  void reply(Connection& c, std::string body, int64_t now_ms, bool then_close = false);
  void flush(Connection& c, int64_t now_ms);
  void watch(Connection& c, uint32_t events);
  void close_connection(uint64_t id);
  void finish_jobs(int64_t now_ms);
  void on_input_while_working(Connection& c);
  // The worker thread's side of a reply: sends what the socket takes now.
  Done send_reply(const Job& job, std::string body, RequestTiming timing);
  void expire(int64_t now_ms);
  // Keeps a request's timing (the first kTimingsKept).
  void record_timing(const RequestTiming& timing);

  const int listen_fd_, epoll_fd_, wake_fd_;
  ControlService* const service_;
  const ControlLimits limits_;

  // Loop thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  uint64_t next_id_ = 1;
  size_t pending_bytes_ = 0;
  int64_t accept_paused_until_ms_ = 0;
  std::atomic<size_t> open_{0};
  mutable std::mutex timings_mu_;
  std::vector<RequestTiming> timings_;  // guarded by timings_mu_

  // Shared with the worker.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<Done> done_;
  std::atomic<bool> done_waiting_{false};  // done_ is not empty: the loop looks at every turn
  std::vector<uint64_t> wake_asked_;  // connections whose Done must wake the loop
  bool stopping_ = false;

  std::thread worker_;
  std::thread thread_;
};

}  // namespace sluice

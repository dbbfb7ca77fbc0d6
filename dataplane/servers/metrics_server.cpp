#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif
#include "metrics_server.hpp"

#include <httplib.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>

#include "counters_prometheus.hpp"

namespace sluice {

namespace {

constexpr size_t kThreadStackBytes = size_t{1} << 20;

constexpr auto kShutdownWait = std::chrono::seconds(3);

// httplib runs each connection as one task until it closes: a thread per task, at most
// `max` at once; tasks beyond wait for one to end. The threads share the queue's state, so a
// thread still serving a trickling client when sluiced stops outlives the queue safely.
class ThreadPerConnection final : public httplib::TaskQueue {
 public:
  ThreadPerConnection(size_t max, std::shared_ptr<std::atomic<bool>> abandoned,
                      std::shared_ptr<std::atomic<size_t>> serving)
      : state_(std::make_shared<State>()), abandoned_(std::move(abandoned)) {
    state_->max = max;
    state_->serving = std::move(serving);
  }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(state_->mu);
    if (state_->running >= state_->max || !start_locked(fn)) state_->waiting.push_back(std::move(fn));
  }

  // Waits for the connections to end, but not for ever: a client trickling a byte a second
  // would hold sluiced's exit. Past the wait, the server is left to its threads (abandoned).
  void shutdown() override {
    std::unique_lock lock(state_->mu);
    if (!state_->idle.wait_for(lock, kShutdownWait,
                               [&] { return state_->running == 0 && state_->waiting.empty(); }))
      abandoned_->store(true);
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable idle;
    std::deque<std::function<void()>> waiting;
    size_t running = 0;
    size_t max = 0;
    std::shared_ptr<std::atomic<size_t>> serving;  // `running`, readable without the lock
  };
  struct Task {
    std::shared_ptr<State> state;
    std::function<void()> fn;
  };

  static void* run(void* arg) {
    std::unique_ptr<Task> task(static_cast<Task*>(arg));
    State& st = *task->state;
    for (;;) {
      task->fn();
      std::unique_lock lock(st.mu);
      if (st.waiting.empty()) {
        --st.running;
        st.serving->store(st.running);
        st.idle.notify_all();
        return nullptr;
      }
      task->fn = std::move(st.waiting.front());
      st.waiting.pop_front();
    }
  }

  bool start_locked(const std::function<void()>& fn) {
    auto* task = new Task{state_, fn};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kThreadStackBytes);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    const bool started = pthread_create(&thread, &attr, run, task) == 0;
    pthread_attr_destroy(&attr);
    if (started) state_->serving->store(++state_->running);
    else delete task;  // no thread to be had: it waits for one that ends
    return started;
  }

  std::shared_ptr<State> state_;
  std::shared_ptr<std::atomic<bool>> abandoned_;
};

struct HostPort {
  std::string host;  // without the brackets of "[v6]"
  int port = 0;
};

// Splits "host:port" / "[v6]:port" into its parts; an error if it is neither.
Result<HostPort> split_address(const std::string& address) {
  const Error bad = invalid_input("expected HOST:PORT (e.g. 127.0.0.1:9100 or [::1]:9100)");
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return bad;
  HostPort out{address.substr(0, colon)};
  std::string& host = out.host;
  const std::string digits = address.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad;  // an IPv6 address needs its brackets
  }
  if (digits.size() > 5) return bad;
  for (char c : digits)
    if (c < '0' || c > '9') return bad;
  out.port = std::stoi(digits);
  if (out.port > 65535) return bad;
  return out;
}

std::chrono::milliseconds ms(int n) { return std::chrono::milliseconds(n); }

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address,
                                                            MetricsLimits limits) {
  const std::string where = "--metrics " + address + ": ";
  Result<HostPort> split = split_address(address);
  if (!split) return invalid_input(where + split.error().message);
  const auto& [host, port] = *split;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    return make_error(where + "cannot resolve " + host + ": " + gai_strerror(rc));
  freeaddrinfo(found);

  std::unique_ptr<MetricsServer> m(new MetricsServer());
  m->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *m->http_;
  const size_t max_connections = limits.max_connections;
  auto abandoned = m->abandoned_;
  auto serving = m->serving_;
  http.new_task_queue = [max_connections, abandoned, serving] {
    return new ThreadPerConnection(max_connections, abandoned, serving);
  };
  http.set_read_timeout(ms(limits.read_timeout_ms));
  http.set_write_timeout(ms(limits.write_timeout_ms));
  http.set_keep_alive_timeout(std::max(1, limits.keep_alive_timeout_ms / 1000));
  http.set_keep_alive_max_count(100);
  http.set_payload_max_length(4096);  // a scrape has no body
  // Not httplib's default SO_REUSEPORT, which would let a second sluiced bind the same port
  // and share its scrapes; and the listening socket kept, for its backlog below.
  auto listen_fd = std::make_shared<int>(-1);
  http.set_socket_options([listen_fd](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listen_fd = sock;
  });
  http.Get("/metrics", [published = m->published_](const httplib::Request&, httplib::Response& res) {
    std::shared_ptr<CountersSource> source;
    {
      std::lock_guard lock(published->mu);
      source = published->source;
    }
    const CountersSource::Taken taken = source->get(kCountersMaxAge, kCountersPatience);
    if (!taken.snap) {
      res.status = 503;
      res.set_content("the dataplane is not set up yet\n", "text/plain; charset=utf-8");
      return;
    }
    std::shared_ptr<const std::string> body;
    {
      std::unique_lock lock(published->mu);
      for (int waits = 0;; ++waits) {
        if (published->from == source && published->seq == taken.seq) {
          body = published->body;
          break;
        }
        const bool underway =
            published->encoding_from == source && published->encoding_seq == taken.seq;
        if (!underway || waits == 2) {  // encode it here (after 2 s, whatever the other does)
          published->encoding_from = source;
          published->encoding_seq = taken.seq;
          break;
        }
        published->encoded.wait_for(lock, std::chrono::seconds(1));
      }
    }
    if (!body) {
      // Encoded outside the lock: a scrape of megabytes holds no other scrape.
      body = std::make_shared<const std::string>(counters_to_prometheus(*taken.snap));
      std::lock_guard lock(published->mu);
      if (published->seq < taken.seq || published->from != source) {
        published->from = source;
        published->seq = taken.seq;
        published->body = body;
      }
      if (published->encoding_from == source && published->encoding_seq == taken.seq)
        published->encoding_from.reset();
      published->encoded.notify_all();
    }
    res.set_content(*body, "text/plain; version=0.0.4; charset=utf-8");
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && req.path != "/metrics")
      res.set_content("sluiced serves its counters at /metrics\n", "text/plain; charset=utf-8");
  });
  // No exception of a handler reaches httplib's threads.
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content("internal error\n", "text/plain; charset=utf-8");
  });
  int bound = 0;
  if (port == 0) {
    bound = http.bind_to_any_port(host);
    if (bound <= 0) return make_error(where + "cannot listen: " + std::strerror(errno));
  } else {
    if (!http.bind_to_port(host, port)) return make_error(where + "cannot listen: " + std::strerror(errno));
    bound = port;
  }
  // httplib listens with a backlog of 5: a burst of connections (a thousand scrapers, or
  // idle ones) would have their SYNs dropped and retried after a second. Listening again on
  // the same socket only raises the backlog.
  if (*listen_fd >= 0) listen(*listen_fd, SOMAXCONN);
  m->port_ = uint16_t(bound);
  m->thread_ = std::thread([http = m->http_.get()] { http->listen_after_bind(); });
  // httplib's stop() does nothing to a server not yet running: wait until it is, so that
  // destroying this at once still ends the thread.
  while (!m->http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return m;
}

MetricsServer::~MetricsServer() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
  // Threads still serving a client use the server: it stays, a deliberate leak at exit.
  if (abandoned_->load()) {
    httplib::Server* left = http_.release();
#if defined(__SANITIZE_ADDRESS__)
    __lsan_ignore_object(left);  // deliberate: LeakSanitizer must not count it (nor what it holds)
#else
    (void)left;
#endif
  }
}

void MetricsServer::publish(const CountersSnapshot& snap) {
  std::shared_ptr<CountersSource> source;
  {
    std::lock_guard lock(published_->mu);
    source = published_->source;
  }
  source->publish(snap);
}

void MetricsServer::use_counters(std::shared_ptr<CountersSource> source) {
  std::lock_guard lock(published_->mu);
  published_->source = std::move(source);
}

}  // namespace sluice

#include "signals.hpp"

#include <atomic>
#include <csignal>

namespace sluice {

namespace {

// Lock-free, hence safe to store from a signal handler.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

struct sigaction g_old_int, g_old_term;

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking call in the control loop returns early
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool StopSignals::requested() const { return g_stop_signal.load(std::memory_order_relaxed) != 0; }

int StopSignals::signal_number() const { return g_stop_signal.load(std::memory_order_relaxed); }

}  // namespace sluice

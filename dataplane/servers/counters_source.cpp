#include "counters_source.hpp"

#include <utility>

namespace sluice {

CountersSource::Taken CountersSource::get(Clock::duration max_age, Clock::duration patience) {
  std::unique_lock lock(mu_);
  const auto now = Clock::now();
  if (!on_demand_ || (snap_ && now - taken_ <= max_age)) return {snap_, seq_};
  const uint64_t before = seq_;
  wanted_ = true;
  demand_.notify_one();
  published_.wait_until(lock, now + patience, [&] { return seq_ != before || !on_demand_; });
  return {snap_, seq_};
}

CountersSource::Taken CountersSource::latest() const {
  std::lock_guard lock(mu_);
  return {snap_, seq_};
}

void CountersSource::serve_on_demand() {
  std::lock_guard lock(mu_);
  on_demand_ = true;
}

bool CountersSource::wait_for_demand(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  demand_.wait_until(lock, deadline, [&] { return wanted_; });
  const bool asked = wanted_;
  wanted_ = false;
  return asked;
}

void CountersSource::publish(CountersSnapshot snap) {
  auto shared = std::make_shared<const CountersSnapshot>(std::move(snap));
  {
    std::lock_guard lock(mu_);
    snap_ = std::move(shared);
    taken_ = Clock::now();
    ++seq_;
  }
  published_.notify_all();
}

void CountersSource::finish() {
  {
    std::lock_guard lock(mu_);
    on_demand_ = false;
  }
  published_.notify_all();
}

}  // namespace sluice

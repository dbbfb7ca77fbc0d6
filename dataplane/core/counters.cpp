#include "counters.hpp"

namespace sluice {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::matched: return "matched";
    case Outcome::conformed: return "conformed";
    case Outcome::exceeded: return "exceeded";
    case Outcome::passed: return "passed";
    case Outcome::dropped: return "dropped";
    case Outcome::marked: return "marked";
    case Outcome::delayed: return "delayed";
    case Outcome::malformed: return "malformed";
    case Outcome::green: return "green";
    case Outcome::yellow: return "yellow";
    case Outcome::red: return "red";
    case Outcome::kCount: break;
  }
  return "?";
}

TrafficCounters& TrafficCounters::operator+=(const TrafficCounters& other) {
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    packets[i] += other.packets[i];
    bytes[i] += other.bytes[i];
  }
  return *this;
}

}  // namespace sluice

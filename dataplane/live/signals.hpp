// SIGINT and SIGTERM as a stop request: while a StopSignals exists, either signal only sets a
// flag that the control loop polls (the handler does nothing else, so it is async-signal-safe);
// the previous handlers come back on destruction. One instance at a time.
#pragma once

namespace sluice {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const;
  int signal_number() const;  // the signal that asked, 0 if none
};

}  // namespace sluice

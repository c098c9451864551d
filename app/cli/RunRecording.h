// Recording a CLI run into the run store: opens the store before training starts (so a bad or
// read-only store fails early), subscribes a recorder to the telemetry hub, and finishes it.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "telemetry/Channel.h"

namespace mlcli {

struct RecordingArgs {
  std::string db;         // --db PATH (else MIRRORLAB_DB, else the user's data folder)
  bool noRecord = false;  // --no-record
  void addTo(CLI::App* cmd);
  // Where runs are recorded: "" with --no-record.
  std::string storePath() const;
};

class RunRecording {
 public:
  // nullptr when --no-record; throws UserError when the store cannot be used. onFailure is
  // called (from the recorder's thread) when a write fails; train stops the run with it.
  static std::unique_ptr<RunRecording> open(const RecordingArgs& args, ml::TelemetryHub& hub,
                                            std::function<void(const std::string&)> onFailure = {});
  ~RunRecording();
  void finish();  // waits until everything is written
  // After finish(): "" when the whole run was recorded, else the first write error; then the
  // run's row is marked failed (when the store allowed it) with the last step it holds.
  std::string error() const;
  int64_t committedStep() const;
  bool failureRecorded() const;
  // Prints the outcome to stderr when recording failed and returns false; true when complete.
  bool report() const;
  void addArtifact(const std::string& path, const std::string& kind, uint64_t checksum);
  std::optional<int64_t> runId() const;
  // While training: the run's id once the recorder has committed it (waits up to timeout).
  std::optional<int64_t> waitForRunId(std::chrono::milliseconds timeout) const;
  // Waits (up to timeout) until the store holds every step up to `step`; false on timeout or error.
  bool waitForStep(int64_t step, std::chrono::milliseconds timeout) const;
  const std::string& path() const { return path_; }

 private:
  RunRecording() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

}  // namespace mlcli

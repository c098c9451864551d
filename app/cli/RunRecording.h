// Recording a CLI run: where (--db, --no-record), what is said when the store could not keep it,
// and the files added to the stored run after it ended. The run itself is an ml::RecordedRun.
#pragma once
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "train/RecordedRun.h"

namespace mlcli {

struct RecordingArgs {
  std::string db;         // --db PATH (else MIRRORLAB_DB, else the user's data folder)
  bool noRecord = false;  // --no-record
  void addTo(CLI::App* cmd);
  // Where runs are recorded: "" with --no-record.
  std::string storePath() const;
};

// Prints the outcome to stderr when the store could not record the whole run and returns false;
// true when it did.
bool reportRecording(const ml::RecordedRun::Result& r, const std::string& storePath);

// Adds a file written after the run (--save-weights) to the stored run's artifacts.
void addRunArtifact(const std::string& storePath, int64_t runId, const std::string& path, const std::string& kind,
                    uint64_t checksum);

}  // namespace mlcli

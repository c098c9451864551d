// Temporary until the recorder lands: recording is wired in the next commit.
#include "RunRecording.h"

namespace mlcli {

void RecordingArgs::addTo(CLI::App* cmd) {
  cmd->add_option("--db", db, "Run store (SQLite) to record into (default: $MIRRORLAB_DB or ~/.local/share/mirrorlab/runs.sqlite)");
  cmd->add_flag("--no-record", noRecord, "Do not record this run");
}
struct RunRecording::Impl {};
std::unique_ptr<RunRecording> RunRecording::open(const RecordingArgs&, ml::TelemetryHub&) { return nullptr; }
RunRecording::~RunRecording() = default;
void RunRecording::finish() {}
void RunRecording::addArtifact(const std::string&, const std::string&, uint64_t) {}
std::optional<int64_t> RunRecording::runId() const { return std::nullopt; }

}  // namespace mlcli

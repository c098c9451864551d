#include "RunRecording.h"

#include <cstdio>
#include <filesystem>

#include "store/RunStore.h"

namespace mlcli {

void RecordingArgs::addTo(CLI::App* cmd) {
  cmd->add_option("--db", db,
                  "Run store (SQLite) to record into (default: $MIRRORLAB_DB, else ~/.local/share/mirrorlab/runs.sqlite)");
  cmd->add_flag("--no-record", noRecord, "Do not record this run");
}

std::string RecordingArgs::storePath() const { return noRecord ? std::string() : db.empty() ? ml::defaultStorePath() : db; }

bool reportRecording(const ml::RecordedRun::Result& r, const std::string& storePath) {
  if (r.recordingError.empty()) return true;
  std::fprintf(stderr, "error: the run store %s could not record this run: %s\n", storePath.c_str(), r.recordingError.c_str());
  const long long step = static_cast<long long>(r.committedStep);
  if (!r.runId)
    std::fprintf(stderr, "nothing of this run is in the store\n");
  else if (r.failureRecorded)
    std::fprintf(stderr, "run %lld is marked failed in the store; it holds steps 1..%lld\n", static_cast<long long>(*r.runId),
                 step);
  else
    std::fprintf(stderr,
                 "run %lld could not be marked failed; the next command that opens the store marks it interrupted "
                 "(it holds steps 1..%lld)\n",
                 static_cast<long long>(*r.runId), step);
  return false;
}

void addRunArtifact(const std::string& storePath, int64_t runId, const std::string& path, const std::string& kind,
                    uint64_t checksum) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(checksum));
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);
  const auto size = std::filesystem::file_size(path, ec);
  auto store = ml::RunStore::open(storePath);
  store.addArtifact(runId, ec ? path : abs.string(), kind, hex,
                    ec ? std::nullopt : std::optional<int64_t>(static_cast<int64_t>(size)));
}

}  // namespace mlcli

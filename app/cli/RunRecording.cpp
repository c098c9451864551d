#include "RunRecording.h"

#include <cstdio>
#include <filesystem>
#include <thread>

#include "store/Recorder.h"
#include "store/RunStore.h"

namespace mlcli {

void RecordingArgs::addTo(CLI::App* cmd) {
  cmd->add_option("--db", db,
                  "Run store (SQLite) to record into (default: $MIRRORLAB_DB, else ~/.local/share/mirrorlab/runs.sqlite)");
  cmd->add_flag("--no-record", noRecord, "Do not record this run");
}

struct RunRecording::Impl {
  std::unique_ptr<ml::Recorder> recorder;
  std::optional<int64_t> id;
};

std::string RecordingArgs::storePath() const { return noRecord ? std::string() : db.empty() ? ml::defaultStorePath() : db; }

std::unique_ptr<RunRecording> RunRecording::open(const RecordingArgs& args, ml::TelemetryHub& hub,
                                                 std::function<void(const std::string&)> onFailure) {
  if (args.noRecord) return nullptr;
  std::unique_ptr<RunRecording> r(new RunRecording());
  r->path_ = args.db.empty() ? ml::defaultStorePath() : args.db;
  r->impl_ = std::make_unique<Impl>();
  // Opening validates the store (and that it is writable) now, before any training.
  ml::RecorderOptions options;
  options.onFailure = std::move(onFailure);
  r->impl_->recorder = std::make_unique<ml::Recorder>(r->path_, hub.subscribe(1 << 18), std::move(options));
  return r;
}

std::string RunRecording::error() const { return impl_->recorder ? impl_->recorder->error() : std::string(); }
int64_t RunRecording::committedStep() const { return impl_->recorder ? impl_->recorder->committedStep() : 0; }
bool RunRecording::failureRecorded() const { return impl_->recorder && impl_->recorder->failureRecorded(); }

bool RunRecording::report() const {
  const std::string err = error();
  if (err.empty()) return true;
  std::fprintf(stderr, "error: the run store %s could not record this run: %s\n", path_.c_str(), err.c_str());
  const auto id = impl_->id;
  const long long step = static_cast<long long>(committedStep());
  if (!id)
    std::fprintf(stderr, "nothing of this run is in the store\n");
  else if (failureRecorded())
    std::fprintf(stderr, "run %lld is marked failed in the store; it holds steps 1..%lld\n", static_cast<long long>(*id), step);
  else
    std::fprintf(stderr,
                 "run %lld could not be marked failed; the next command that opens the store marks it interrupted "
                 "(it holds steps 1..%lld)\n",
                 static_cast<long long>(*id), step);
  return false;
}

RunRecording::~RunRecording() {
  if (impl_ && impl_->recorder) impl_->recorder->stop();
}

void RunRecording::finish() {
  if (!impl_->recorder) return;
  impl_->recorder->stop();
  impl_->id = impl_->recorder->runId();
}

void RunRecording::addArtifact(const std::string& path, const std::string& kind, uint64_t checksum) {
  if (!impl_->id || !error().empty()) return;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(checksum));
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);
  const auto size = std::filesystem::file_size(path, ec);
  auto store = ml::RunStore::open(path_);
  store.addArtifact(*impl_->id, ec ? path : abs.string(), kind, hex,
                    ec ? std::nullopt : std::optional<int64_t>(static_cast<int64_t>(size)));
}

std::optional<int64_t> RunRecording::runId() const { return impl_->id; }

bool RunRecording::waitForStep(int64_t step, std::chrono::milliseconds timeout) const {
  if (!impl_->recorder) return false;
  return impl_->recorder->waitForStep(step, timeout);
}

std::optional<int64_t> RunRecording::waitForRunId(std::chrono::milliseconds timeout) const {
  if (impl_->id) return impl_->id;
  return impl_->recorder ? impl_->recorder->waitForRunId(timeout) : std::nullopt;
}

}  // namespace mlcli

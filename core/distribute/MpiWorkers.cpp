#include "distribute/MpiWorkers.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <type_traits>

#include "Error.h"
#include "ExecutableDir.h"
#include "distribute/mpi/MpiPluginApi.h"

namespace ml {

namespace {

constexpr const char* kPluginFile = "libmirrorlab_mpi.so";

struct Api {
  mlmpi_api_version_fn version = nullptr;
  mlmpi_init_fn init = nullptr;
  mlmpi_rank_fn rank = nullptr;
  mlmpi_size_fn size = nullptr;
  mlmpi_engine_fn engine = nullptr;
  mlmpi_host_fn host = nullptr;
  mlmpi_allreduce_fn allreduce = nullptr;
  mlmpi_bcast_fn bcast = nullptr;
  mlmpi_allgather_fn allgather = nullptr;
  mlmpi_set_progress_fn progress = nullptr;
  mlmpi_interrupt_fn interrupt = nullptr;
  mlmpi_abort_fn abort = nullptr;
  mlmpi_finalize_fn finalize = nullptr;
  mlmpi_waiting_seconds_fn waiting = nullptr;
};

class PluginWorkers : public MpiWorkers {
 public:
  PluginWorkers(Api api, double timeout) : api_(api), timeout_(timeout) {
    rank_ = api_.rank();
    size_ = api_.size();
    engine_ = api_.engine();
    for (int r = 0; r < size_; ++r) hosts_.emplace_back(api_.host(r));
  }
  ~PluginWorkers() override {
    if (!finished_) api_.finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string host() const override { return hosts_[static_cast<size_t>(rank_)]; }
  std::vector<std::string> hosts() const override { return hosts_; }
  std::string engine() const override { return engine_; }
  double timeoutSeconds() const override { return timeout_; }
  void allReduce(std::span<float> data, const std::string& what) override {
    check(api_.allreduce(data.data(), static_cast<int64_t>(data.size()), 0, what.c_str(), err_, sizeof err_));
  }
  void allReduce(std::span<double> data, const std::string& what) override {
    check(api_.allreduce(data.data(), static_cast<int64_t>(data.size()), 1, what.c_str(), err_, sizeof err_));
  }
  void broadcast(std::span<float> data, int root, const std::string& what) override {
    check(api_.bcast(data.data(), static_cast<int64_t>(data.size()), root, what.c_str(), err_, sizeof err_));
  }
  std::vector<std::string> allGather(const std::string& mine, const std::string& what) override {
    std::vector<std::string> out(static_cast<size_t>(size_));
    auto sink = [](void* ctx, int rank, const char* bytes, int len) {
      (*static_cast<std::vector<std::string>*>(ctx))[static_cast<size_t>(rank)].assign(bytes, static_cast<size_t>(len));
    };
    check(api_.allgather(mine.data(), static_cast<int64_t>(mine.size()), sink, &out, what.c_str(), err_, sizeof err_));
    return out;
  }
  void setProgress(int64_t step, const char* phase) override { api_.progress(step, phase); }
  void interrupt(const std::string& reason) override { api_.interrupt(reason.c_str()); }
  double waitingSeconds() const override { return api_.waiting(); }
  void finish() override {
    if (finished_) return;
    finished_ = true;
    api_.finalize();
  }
  [[noreturn]] void abortAll(int code) override {
    api_.abort(code);
    std::_Exit(code);  // MPI_Abort does not return; in case it does
  }

 private:
  void check(int rc) {
    if (rc != 0) throw WorkerLost(err_);
  }
  Api api_;
  double timeout_;
  int rank_ = 0, size_ = 1;
  std::string engine_;
  std::vector<std::string> hosts_;
  bool finished_ = false;
  // One call at a time per thread is the contract; the strategy's threads use distinct calls in
  // turn (replica 0's communication thread, then the caller), so one buffer serves.
  char err_[2048] = {};
};

}  // namespace

bool launchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (const char* e = std::getenv(v); e && *e) return true;
  return false;
}

std::vector<std::string> mpiPluginCandidates() {
  if (const char* env = std::getenv("MIRRORLAB_MPI_PLUGIN"); env && *env) return {env};
  std::vector<std::string> c;
  const std::string dir = executableDir();
  if (!dir.empty()) {
    c.push_back(dir + "/" + kPluginFile);
    c.push_back(dir + "/../lib/mirrorlab/" + kPluginFile);
  }
  return c;
}

std::unique_ptr<MpiWorkers> startMpiWorkers(double timeoutSeconds) {
  if (!(timeoutSeconds > 0)) throw UserError("the worker timeout must be a positive number of seconds");
  const auto candidates = mpiPluginCandidates();
  std::string path;
  for (const auto& c : candidates)
    if (std::filesystem::exists(c)) {
      path = c;
      break;
    }
  if (path.empty()) {
    std::string where;
    for (const auto& c : candidates) where += (where.empty() ? "" : ", ") + c;
    throw UserError("this process was started by mpirun, but the MPI plugin " + std::string(kPluginFile) +
                    " is not where it is looked for (" + where +
                    "): build Mirrorlab with Open MPI installed (scripts/deps.sh installs libopenmpi-dev), install the "
                    "mirrorlab-cli package, or set MIRRORLAB_MPI_PLUGIN to its path");
  }
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    throw UserError("the MPI plugin " + path + " cannot be loaded: " + (e ? e : "unknown dlopen error") +
                    " (is Open MPI installed? scripts/deps.sh installs openmpi-bin)");
  }
  Api api;
  std::string missing;
  auto resolve = [&](auto& field, const char* symbol) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(dlsym(handle, symbol));
    if (!field) missing += std::string(missing.empty() ? "" : ", ") + symbol;
  };
  resolve(api.version, "mlmpi_api_version");
  if (!api.version) throw UserError(path + " is not a Mirrorlab MPI plugin (no mlmpi_api_version)");
  if (api.version() != MLMPI_API_VERSION)
    throw UserError("the MPI plugin " + path + " speaks API version " + std::to_string(api.version()) + ", this program " +
                    std::to_string(MLMPI_API_VERSION) + ": install the plugin of the same build");
  resolve(api.init, "mlmpi_init");
  resolve(api.rank, "mlmpi_rank");
  resolve(api.size, "mlmpi_size");
  resolve(api.engine, "mlmpi_engine");
  resolve(api.host, "mlmpi_host");
  resolve(api.allreduce, "mlmpi_allreduce");
  resolve(api.bcast, "mlmpi_bcast");
  resolve(api.allgather, "mlmpi_allgather");
  resolve(api.progress, "mlmpi_set_progress");
  resolve(api.interrupt, "mlmpi_interrupt");
  resolve(api.abort, "mlmpi_abort");
  resolve(api.finalize, "mlmpi_finalize");
  resolve(api.waiting, "mlmpi_waiting_seconds");
  if (!missing.empty())
    throw UserError("the MPI plugin " + path + " lacks " + missing + ": install the plugin of the same build");
  char err[1024] = {};
  if (api.init(timeoutSeconds, err, sizeof err) != 0) throw UserError(std::string("MPI could not start: ") + err);
  return std::make_unique<PluginWorkers>(api, timeoutSeconds);
}

}  // namespace ml

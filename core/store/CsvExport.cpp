// A run as four CSV files with headers, for spreadsheets and scripts. Numbers are written in the
// shortest form that reads back to the same double.
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "AtomicFile.h"
#include "Error.h"
#include "store/RunStore.h"

namespace ml {
namespace fs = std::filesystem;
namespace {

// One CSV file, written whole or not at all (AtomicFile): a full disk never leaves a cut table.
class CsvFile {
 public:
  CsvFile(const fs::path& path, const char* header) : out_(path.string(), "CSV file") {
    out_.write(std::string_view(header));
    out_.write("\n");
  }
  CsvFile& num(double v) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return cell(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
  }
  CsvFile& num(int64_t v) { return cell(std::to_string(v)); }
  CsvFile& opt(const std::optional<double>& v) { return v ? num(*v) : cell(""); }
  CsvFile& text(std::string_view v) {  // quoted: checksums hold commas
    std::string q = "\"";
    for (char c : v) {
      if (c == '"') q += '"';
      q += c;
    }
    q += '"';
    return cell(q);
  }
  void endRow() {
    out_.write("\n");
    first_ = true;
  }
  void close() { out_.commit(); }

 private:
  CsvFile& cell(std::string_view v) {
    if (!first_) out_.write(",");
    out_.write(v);
    first_ = false;
    return *this;
  }
  AtomicFile out_;
  bool first_ = true;
};

}  // namespace

void RunStore::exportCsv(int64_t run, const std::string& dir) {
  requireRun(run);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UserError("cannot create the folder " + dir + " (" + ec.message() + "); choose a writable folder for --csv");
  std::vector<StepEvent> steps = loadSteps(run, 0, INT64_MAX);

  CsvFile s(fs::path(dir) / "steps.csv", "step,epoch,loss,metric,lr,samples,step_time,wall_time,loss_scale,skipped");
  for (const StepEvent& e : steps) {
    s.num(e.step).num(int64_t(e.epoch)).num(e.loss).num(e.metric).num(e.lr).num(e.samples);
    s.num(e.stepTime).num(e.wallTime).num(e.lossScale).num(int64_t(e.skipped ? 1 : 0)).endRow();
  }
  s.close();

  CsvFile r(fs::path(dir) / "replica_steps.csv",
            "step,replica,samples,start,forward,backward,allreduce,wait,optimizer,allgather,network,input");
  for (const StepEvent& e : steps)
    for (const ReplicaStep& x : e.replicas) {
      r.num(e.step).num(int64_t(x.replica)).num(x.samples).num(x.start).num(x.phases.forward);
      r.num(x.phases.backward).num(x.phases.allreduce).num(x.phases.wait);
      r.num(x.phases.optimizer).num(x.phases.allgather).num(x.phases.network).num(x.phases.input).endRow();
    }
  r.close();

  CsvFile ep(fs::path(dir) / "epochs.csv",
             "epoch,train_loss,train_metric,val_loss,val_metric,seconds,samples_per_sec,"
             "allreduce_share,wait_share,in_sync,wall_time,checksums");
  for (const EpochEvent& e : loadRun(run).epochs) {
    ep.num(int64_t(e.epoch)).num(e.trainLoss).num(e.trainMetric).opt(e.valLoss).opt(e.valMetric);
    ep.num(e.seconds).num(e.samplesPerSec).num(e.allreduceShare).num(e.waitShare);
    std::string sums;
    char buf[20];
    for (uint64_t c : e.checksums) {
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(c));
      if (!sums.empty()) sums += ' ';
      sums += buf;
    }
    ep.num(int64_t(e.inSync ? 1 : 0)).num(e.wallTime).text(sums).endRow();
  }
  ep.close();

  // NVML samples are of a physical GPU (gpu, and the replicas sharing it); empty cells: unknown.
  CsvFile d(fs::path(dir) / "device_samples.csv",
            "wall_time,device,utilization,memory_bytes,source,gpu,gpu_replicas,memory_total_bytes,temperature_c,memory_busy");
  for (const DeviceSample& x : loadDeviceSamples(run)) {
    const bool nvml = x.source == SampleSource::Nvml;
    d.num(x.wallTime).num(int64_t(x.device)).num(x.utilization).num(x.memoryBytes).text(toString(x.source));
    d.opt(nvml ? std::optional<double>(x.gpu) : std::nullopt).opt(nvml ? std::optional<double>(x.gpuReplicas) : std::nullopt);
    d.opt(x.memoryTotalBytes > 0 ? std::optional<double>(x.memoryTotalBytes) : std::nullopt);
    d.opt(x.temperatureC).opt(x.memoryBusy).endRow();
  }
  d.close();
}

}  // namespace ml

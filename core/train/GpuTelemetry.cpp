#include "train/GpuTelemetry.h"

#include <chrono>
#include <cstdio>

#include "train/Trainer.h"

namespace ml {

GpuSampler::GpuSampler(const CudaPlugin& plugin, const std::vector<int>& replicaGpus, int firstReplica) : plugin_(plugin) {
  for (size_t r = 0; r < replicaGpus.size(); ++r) {
    if (!gpus_.empty() && gpus_.back().physical == replicaGpus[r]) {
      ++gpus_.back().replicas;
      continue;
    }
    gpus_.push_back(Gpu{replicaGpus[r], firstReplica + static_cast<int>(r), 1});
  }
  if (!plugin_.nvmlSample) {
    why_ = "the CUDA plugin " + plugin_.path + " has no mlcuda_nvml_sample";
    return;
  }
  for (const Gpu& g : gpus_) {
    mlcuda_gpu_sample s{};
    const mlcuda_status st = plugin_.nvmlSample(g.physical, &s);
    if (st.code != MLCUDA_OK) {
      why_ = st.message[0] ? st.message : "mlcuda_nvml_sample failed on gpu:" + std::to_string(g.physical);
      return;
    }
  }
}

GpuSampler::~GpuSampler() { stop(false); }

std::string GpuSampler::lostReason() const {
  std::lock_guard lock(mu_);
  return lostReason_;
}

std::string GpuSampler::sentence(double period) const {
  char every[32];
  std::snprintf(every, sizeof every, "%g", period);
  std::string s = std::string("GPU telemetry from NVML every ") + every +
                  " s, off the training threads: utilization, memory used and temperature of ";
  for (size_t i = 0; i < gpus_.size(); ++i) {
    s += (i == 0 ? "" : ", ") + std::string("gpu:") + std::to_string(gpus_[i].physical);
    if (gpus_[i].replicas > 1)
      s += " (one sample of the physical GPU for the " + std::to_string(gpus_[i].replicas) + " replicas that share it)";
  }
  return s;
}

std::vector<DeviceSample> GpuSampler::read(double wall) {
  std::vector<DeviceSample> out;
  if (!available() || failed_.load()) return out;
  for (const Gpu& g : gpus_) {
    mlcuda_gpu_sample s{};
    const mlcuda_status st = plugin_.nvmlSample(g.physical, &s);
    if (st.code != MLCUDA_OK) {
      {
        std::lock_guard lock(mu_);
        lostReason_ = st.message;
      }
      failed_.store(true);
      return {};
    }
    DeviceSample d;
    d.wallTime = wall;
    d.device = g.firstReplica;
    d.source = SampleSource::Nvml;
    d.gpu = g.physical;
    d.gpuReplicas = g.replicas;
    d.utilization = static_cast<double>(s.utilization_percent) / 100.0;
    d.memoryBytes = static_cast<double>(s.memory_used_bytes);
    d.memoryTotalBytes = static_cast<double>(s.memory_total_bytes);
    if (s.temperature_c >= 0) d.temperatureC = s.temperature_c;
    d.memoryBusy = static_cast<double>(s.memory_busy_percent) / 100.0;
    out.push_back(d);
  }
  return out;
}

void GpuSampler::start(double period, std::function<void()> tick) {
  tick_ = std::move(tick);
  tick_();
  const auto every = std::chrono::duration<double>(period > 0 ? period : 0.5);
  thread_ = std::thread([this, every] {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, every, [this] { return stop_; })) {
      lock.unlock();
      tick_();
      lock.lock();
    }
  });
}

void GpuSampler::stop(bool lastSample) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (lastSample) tick_();  // the state the run ends in
}

// ---- the Trainer's side --------------------------------------------------------------------------

// GPU runs in one process sample NVML when the plugin can read it; everything else keeps the
// computed utilization, and the start line says why. Several workers are not sampled: the lead
// worker records the run and would see only its own GPUs.
void Trainer::setUpGpuTelemetry() {
  const MirroredStrategy& s = *strategy_;
  if (!s.onGpu()) return;
  const std::string computed = "GPU utilization is compute time / step time per replica, as on CPU devices: ";
  if (s.workerCount() > 1) {
    telemetryLine_ = computed + "NVML is sampled in single-process runs only (this run has several workers)";
    return;
  }
  std::string why;
  const CudaPlugin* plugin = cudaPlugin(&why);
  if (!plugin) {  // not reached in practice: the strategy loaded it
    telemetryLine_ = computed + "no CUDA plugin (" + why + ")";
    return;
  }
  std::vector<int> gpus;
  for (const Device& d : s.options().devices.devices) gpus.push_back(d.physical);
  gpuSampler_ = std::make_unique<GpuSampler>(*plugin, gpus, s.globalIndex(0));
  if (gpuSampler_->available()) {
    telemetryLine_ = gpuSampler_->sentence(options_.gpuSampleInterval);
  } else {
    telemetryLine_ = computed + "NVML cannot be read (" + gpuSampler_->unavailableReason() + ")";
    gpuSampler_.reset();
  }
}

void Trainer::startGpuTelemetry() {
  if (!gpuSampler_) return;
  gpuSampler_->start(options_.gpuSampleInterval, [this] {
    // Under the clock's lock: a pause cannot begin or end between the time and the publishing, so
    // the samples' times never run backwards around a RunPaused event.
    std::lock_guard lock(clockMu_);
    if (inPause_) return;  // no training time passes while paused
    for (const DeviceSample& d : gpuSampler_->read(wall())) hub_.publish(d);
  });
}

void Trainer::stopGpuTelemetry() {
  if (gpuSampler_) gpuSampler_->stop();
}

bool Trainer::nvmlSampling() const { return gpuSampler_ && !gpuSampler_->failed(); }

}  // namespace ml

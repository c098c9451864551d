// `summary`, `evaluate`, `predict` and `devices`.
#include <cstdio>
#include <fstream>
#include <optional>

#include "AtomicFile.h"
#include "Commands.h"
#include "Error.h"
#include "Limits.h"
#include "Overrides.h"
#include "backend/DeviceProbe.h"
#include "data/Dataset.h"
#include "data/Features.h"
#include "export/WeightsNpz.h"
#include "nn/Precision.h"
#include "nn/Summary.h"
#include "project/WeightsFile.h"
#include "train/FitCheck.h"
#include "train/Trainer.h"

namespace mlcli {

namespace {

struct ModelArgs {
  std::string project, weights, input, output;
  Overrides o;
  int64_t batch = 0;
  bool json = false;
};

// A model's errors (layer arguments, sizes, memory) name the project file they come from.
template <class F>
auto naming(const std::string& file, F&& f) {
  try {
    return f();
  } catch (const ml::UserError& e) {
    throw ml::UserError(file + ": " + e.what(), e.field());
  }
}

std::unique_ptr<ml::MirroredStrategy> makeStrategy(const ml::Project& p) {
  ml::StrategyOptions so;
  so.devices = p.distribute.devices;
  so.allreduce = p.distribute.allreduce;
  so.threadsPerDevice = p.distribute.threadsPerDevice;
  so.bucketBytes = p.distribute.bucketBytes;
  so.shardOptimizer = p.distribute.shardOptimizer;
  so.tf32 = p.distribute.tf32;
  const auto loss = ml::Loss::make(p.training.loss, p.training.fromLogits);
  const auto metric = ml::metricFor(p.training.metrics.empty() ? "" : p.training.metrics.front(), loss);
  return std::make_unique<ml::MirroredStrategy>(p.model, loss, metric, p.training.optimizer, so);
}

int summary(ModelArgs& a) {
  ml::Project p = ml::Project::load(a.project);
  a.o.apply(p);
  if (a.batch < 0 || a.batch > ml::kMaxBatch)
    throw ml::UserError("--batch must be from 1 to " + std::to_string(ml::kMaxBatch) + ", got " + std::to_string(a.batch));
  auto model = naming(a.project, [&] { return ml::Sequential(p.model); });
  ml::applyPrecision(model, p.training.precision);
  const int64_t n = p.distribute.devices.size();
  const int64_t batch =
      a.batch > 0 ? a.batch : (p.training.perDeviceBatch ? p.training.batchSize : (p.training.batchSize + n - 1) / n);
  std::printf("%s", ml::formatSummary(model, p.name, batch, ml::optimizerSlotCount(p.training.optimizer)).c_str());
  return 0;
}

void loadInto(ml::MirroredStrategy& s, const std::string& weights) {
  // FILE.npz: NumPy arrays named per layer (from --save-weights FILE.npz or another program); else .mlw.
  if (weights.size() > 4 && weights.compare(weights.size() - 4, 4, ".npz") == 0)
    ml::loadWeightsNpz(s.model(0), weights);
  else
    ml::loadWeights(s.model(0), weights);
  s.broadcastParameters();
}

int evaluate(ModelArgs& a) {
  ml::Project p = ml::Project::load(a.project);
  a.o.apply(p);
  auto data = ml::loadData(p.data);
  const ml::Dataset& set = data.validation ? *data.validation : data.train;
  auto s = naming(a.project, [&] { return makeStrategy(p); });
  naming(a.project, [&] { ml::checkLossFitsData(s->loss(), s->metric(), s->model(0), set); });
  loadInto(*s, a.weights);
  const auto r = ml::evaluateAll(*s, set);
  const double n = static_cast<double>(r.samples);
  if (a.json) {  // every digit, for scripts that compare with another framework's evaluate
    std::printf(
        "%s\n",
        nlohmann::json{
            {"dataset", set.name}, {"samples", r.samples}, {"loss", r.lossSum / n}, {ml::toString(s->metric()), r.metricSum / n}}
            .dump()
            .c_str());
    return 0;
  }
  std::printf("%s: %lld samples on %s\nloss: %.4f - %s: %.4f\n", set.name.c_str(), static_cast<long long>(r.samples),
              s->options().devices.describe().c_str(), r.lossSum / n, ml::toString(s->metric()), r.metricSum / n);
  return 0;
}

int predict(ModelArgs& a) {
  ml::Project p = ml::Project::load(a.project);
  a.o.apply(p);
  ml::Dataset in = ml::readFeatures(a.input);
  auto s = naming(a.project, [&] { return makeStrategy(p); });
  loadInto(*s, a.weights);
  if (in.featureCount() != s->model(0).inFeatures())
    throw ml::UserError("input '" + a.input + "' has samples of shape " + ml::shapeToString(in.sampleShape, false) +
                        " but the model expects " + ml::shapeToString(s->model(0).inputShape(), false));
  const int64_t k = s->model(0).outFeatures();
  // Unlabelled: zero targets, k per sample so that every loss reads inside them; the loss is ignored.
  in.targetDim = k;
  in.y.assign(static_cast<size_t>(in.size * k), 0.0f);
  std::vector<float> out(static_cast<size_t>(in.size * k));
  ml::evaluateAll(*s, in, out.data());
  // A file is written whole or not at all (temporary file, fsync, rename); stdout is checked too.
  std::optional<ml::AtomicFile> file;
  if (!a.output.empty()) file.emplace(a.output, "predictions file");
  FILE* f = file ? file->stream() : stdout;
  for (int64_t j = 0; j < k; ++j) std::fprintf(f, "%sp%lld", j ? "," : "", static_cast<long long>(j));
  std::fprintf(f, "\n");
  for (int64_t i = 0; i < in.size; ++i) {
    for (int64_t j = 0; j < k; ++j) std::fprintf(f, "%s%.6g", j ? "," : "", out[static_cast<size_t>(i * k + j)]);
    std::fprintf(f, "\n");
  }
  if (file)
    file->commit();
  else if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw ml::UserError("writing the predictions to standard output failed");
  std::fprintf(stderr, "predicted (%lld, %lld) probabilities on %s%s%s\n", static_cast<long long>(in.size),
               static_cast<long long>(k), s->options().devices.describe().c_str(), a.output.empty() ? "" : " into ",
               a.output.c_str());
  return 0;
}

int devices() {
  const auto r = ml::probeDevices();
  std::printf("CPU: %s, %d cores\n", r.cpuModel.c_str(), r.cpuCores);
  std::printf("  simulated devices: cpu:1..cpu:%d (--devices cpu:N); more than %d share cores\n", ml::kMaxReplicas, r.cpuCores);
  std::printf(
      "  thread policy: one replica uses all %d cores for its math (BLAS); with N replicas each replica is one\n"
      "  worker thread running BLAS single-threaded, so N <= %d replicas get a core each\n",
      r.cpuCores, r.cpuCores);
  if (!r.gpuBackend.empty()) std::printf("CUDA plugin: %s\n", r.gpuBackend.c_str());
  if (r.gpus.empty()) {
    std::printf("GPUs: none. %s\n", r.noGpuReason.c_str());
  } else {
    for (const auto& g : r.gpus)
      std::printf("gpu:%d %s, %.1f GiB, compute capability %d.%d, driver %s, runtime %s\n", g.index, g.name.c_str(),
                  static_cast<double>(g.memoryBytes) / (1 << 30), g.ccMajor, g.ccMinor, g.driverVersion.c_str(),
                  g.runtimeVersion.c_str());
  }
  return 0;
}

}  // namespace

void addModelCommands(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<ModelArgs>();
  auto* s = app.add_subcommand("summary", "Print the model like Keras' model.summary()");
  s->add_option("project", a->project, "Project file (JSON)")->required();
  s->add_option("--batch", a->batch, "Per-replica batch for the memory estimate (default: the project's)");
  s->add_option("--devices", a->o.devices, "Devices, for the per-replica memory estimate");
  s->callback([a, &exitCode] { exitCode = guarded([&] { return summary(*a); }); });

  auto* e = app.add_subcommand("evaluate", "Loss and metrics of saved weights on the test (or validation) set");
  e->add_option("project", a->project, "Project file (JSON)")->required();
  e->add_option("--weights", a->weights, "Weights saved by train --save-weights (.mlw, or .npz arrays named like dense_1/kernel)")
      ->required();
  a->o.addTo(e, false);
  e->add_flag("--json", a->json, "Print {\"dataset\", \"samples\", \"loss\", metric} as JSON with every digit");
  e->callback([a, &exitCode] { exitCode = guarded([&] { return evaluate(*a); }); });

  auto* p = app.add_subcommand("predict", "Class probabilities (samples, classes) for an IDX images file or a CSV of features");
  p->add_option("project", a->project, "Project file (JSON)")->required();
  p->add_option("--weights", a->weights, "Weights saved by train --save-weights (.mlw, or .npz arrays named like dense_1/kernel)")
      ->required();
  p->add_option("--input", a->input, "IDX images file (.gz or raw) or CSV of numeric features")->required();
  p->add_option("--output", a->output, "CSV file to write (default: standard output)");
  a->o.addTo(p, false);
  p->callback([a, &exitCode] { exitCode = guarded([&] { return predict(*a); }); });

  auto* d = app.add_subcommand("devices", "List the devices this machine offers, and why there is no GPU");
  d->callback([&exitCode] { exitCode = guarded([] { return devices(); }); });
}

}  // namespace mlcli

// Builds the model with core's Sequential to read shapes, parameters and the reason a layer fails.
#include "ModelAnalysis.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "Error.h"
#include "backend/DeviceList.h"
#include "distribute/MirroredStrategy.h"
#include "nn/LayerKind.h"
#include "nn/Precision.h"
#include "nn/Sequential.h"
#include "nn/Summary.h"

namespace mlui {

std::vector<std::string> layerNames(const ml::ModelSpec& spec) {
  std::vector<std::string> types, names;
  for (const auto& l : spec.layers) {
    types.emplace_back(l.type());
    names.push_back(l.name);
  }
  return ml::layerNames(types, names);
}

std::string describeLayer(const ml::LayerSpec& l) { return ml::describeLayer(l.args); }

int allReplicaCount(const ml::Project& p) { return replicaCount(p) * std::max(1, p.distribute.workers); }

int replicaCount(const ml::Project& p) { return p.distribute.devices.size(); }

int64_t globalBatch(const ml::Project& p) {
  const int64_t b = p.training.batchSize;
  return p.training.perDeviceBatch ? b * allReplicaCount(p) : b;
}

int64_t perReplicaBatch(const ml::Project& p) {
  const int64_t micro = globalBatch(p) / std::max(1, p.training.accumulate);
  const int n = allReplicaCount(p);  // every worker's replicas share each batch
  return (micro + n - 1) / n;
}

ModelAnalysis analyzeModel(const ml::Project& p) {
  ModelAnalysis a;
  const auto& spec = p.model;
  const auto names = layerNames(spec);
  a.inputShape = ml::shapeToString(spec.inputShape);
  a.replicas = replicaCount(p);
  for (const auto& d : p.distribute.devices.devices) a.deviceLabels.push_back(d.label());
  a.perReplicaBatch = perReplicaBatch(p);
  a.optimizerSlots = ml::optimizerSlotCount(p.training.optimizer);
  for (size_t i = 0; i < spec.layers.size(); ++i)
    a.rows.push_back({names[i], std::string(spec.layers[i].type()), describeLayer(spec.layers[i]), "?", 0, false, {}});

  auto fill = [&](const ml::Sequential& m) {
    const auto s = m.summary();
    for (size_t i = 0; i < s.size(); ++i) {
      a.rows[i].shape = ml::shapeToString(s[i].outputShape);
      a.rows[i].params = s[i].params;
      a.rows[i].known = true;
    }
  };
  try {
    ml::Sequential m(spec);
    fill(m);
    a.ok = true;
    a.totalParams = m.paramCount();
    a.nonTrainableParams = m.nonTrainableCount();
    a.outputShape = ml::shapeToString(m.outputShape());
    a.paramBytes = a.gradBytes = static_cast<double>(a.totalParams) * sizeof(float);
    // Sharded, each replica keeps the state of its own chunks only: the largest share, exactly as
    // the strategy allocates it (the shares differ by a few floats where chunks are uneven).
    a.optimizerParams = a.totalParams;
    try {
      ml::StrategyOptions so;
      so.devices = p.distribute.devices;
      so.bucketBytes = p.distribute.bucketBytes;
      so.shardOptimizer = p.distribute.shardOptimizer && so.devices.kind == ml::DeviceKind::Cpu;
      a.shardedOptimizer = so.shardOptimizer && so.devices.size() > 1;
      if (a.shardedOptimizer) {
        a.optimizerParams = 0;
        for (int r = 0; r < so.devices.size(); ++r) a.optimizerParams = std::max(a.optimizerParams, ml::optimizerShare(m, so, r));
      }
    } catch (const ml::UserError&) {
      // A bad device list is named on the Devices screen; the summary counts the whole state.
    }
    a.optimizerBytes = static_cast<double>(a.optimizerParams) * sizeof(float) * a.optimizerSlots;
    a.activationBytes = static_cast<double>(m.activationBytes(a.perReplicaBatch));
    if (const ml::Precision policy = p.training.precision; policy != ml::Precision::Float32) {
      a.precision = ml::toString(policy);
      ml::applyPrecision(m, policy);
      a.lowPrecisionBytes = static_cast<double>(m.lowPrecisionBytes(a.perReplicaBatch));
    }
    return a;
  } catch (const ml::UserError& e) {
    a.error = e.what();
  }
  // Find the first layer that does not fit: the longest prefix that builds.
  ml::ModelSpec prefix = spec;
  for (size_t k = 1; k <= spec.layers.size(); ++k) {
    prefix.layers.assign(spec.layers.begin(), spec.layers.begin() + static_cast<std::ptrdiff_t>(k));
    for (size_t i = 0; i < k; ++i) prefix.layers[i].name = names[i];
    try {
      ml::Sequential m(prefix);
      fill(m);
    } catch (const ml::UserError& e) {
      a.errorLayer = static_cast<int>(k - 1);
      a.rows[k - 1].error = e.what();
      a.error = e.what();
      break;
    }
  }
  for (const auto& r : a.rows) a.totalParams += r.known ? r.params : 0;
  return a;
}

}  // namespace mlui

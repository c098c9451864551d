// What every backend shares: the list of operations a model needs, the check that refuses the first
// one a kind cannot run, and the choice of backend for a device list.
#include "backend/Backend.h"

#include "Error.h"
#include "backend/cpu/CpuBackend.h"
#include "backend/gpu/CudaBackend.h"

namespace ml {

std::vector<BackendOp> requiredOps(const Sequential& model, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer) {
  std::vector<BackendOp> ops;
  for (size_t i = 0; i < model.layerCount(); ++i) {
    const Layer& l = model.layer(i);
    ops.push_back({BackendOp::Kind::Layer, l.type(), "layer '" + l.name + "' (" + l.type() + ")"});
  }
  ops.push_back({BackendOp::Kind::Loss, loss.name(), "loss '" + loss.name() + "'"});
  if (metric != MetricKind::None)
    ops.push_back({BackendOp::Kind::Metric, toString(metric), std::string("metric '") + toString(metric) + "'"});
  ops.push_back(
      {BackendOp::Kind::Optimizer, toString(optimizer.kind), std::string("optimizer '") + toString(optimizer.kind) + "'"});
  return ops;
}

void requireOps(const std::vector<BackendOp>& ops, const std::function<std::string(const BackendOp&)>& refuses) {
  for (const auto& op : ops)
    if (std::string why = refuses(op); !why.empty()) throw UserError(op.label.empty() ? why : op.label + " " + why);
}

std::unique_ptr<Backend> makeBackend(BackendConfig config) {
  switch (config.devices.kind) {
    case DeviceKind::Cpu:
      return std::make_unique<CpuBackend>(std::move(config.hosts), config.loss, config.metric, config.optimizer,
                                          config.blasThreads);
    case DeviceKind::Gpu: return std::make_unique<CudaBackend>(config);
  }
  throw std::logic_error("makeBackend: unknown device kind");
}

}  // namespace ml

// What every backend shares: the list of operations a model needs, and the check against supports().
#include "backend/Backend.h"

#include "Error.h"

namespace ml {

std::vector<BackendOp> requiredOps(const Sequential& model, const Loss& loss, MetricKind metric,
                                   const OptimizerSpec& optimizer) {
  std::vector<BackendOp> ops;
  for (size_t i = 0; i < model.layerCount(); ++i) {
    const Layer& l = model.layer(i);
    ops.push_back({BackendOp::Kind::Layer, l.type(), "layer '" + l.name + "' (" + l.type() + ")"});
  }
  ops.push_back({BackendOp::Kind::Loss, loss.name(), "loss '" + loss.name() + "'"});
  if (metric != MetricKind::None) ops.push_back({BackendOp::Kind::Metric, toString(metric), std::string("metric '") + toString(metric) + "'"});
  ops.push_back({BackendOp::Kind::Optimizer, optimizer.name, "optimizer '" + optimizer.name + "'"});
  return ops;
}

void Backend::require(const std::vector<BackendOp>& ops) const {
  for (const auto& op : ops)
    if (std::string why = supports(op); !why.empty()) throw UserError(op.label.empty() ? why : op.label + " " + why);
}

}  // namespace ml

// Building the tests' mirrored strategies (Strategies.h).
#include "support/Strategies.h"

#include <utility>

namespace mltest {

ml::OptimizerSpec optimizer(const std::string& name, double lr) {
  ml::OptimizerSpec o;
  o.kind = *ml::optimizerKindNamed(name);
  o.learningRate = lr;
  o.momentum = name == "sgd" ? 0.9 : name == "rmsprop" ? 0.5 : 0.0;
  return o;
}

std::unique_ptr<ml::MirroredStrategy> makeStrategy(const ml::ModelSpec& model, const std::string& devices,
                                                   const ml::OptimizerSpec& optimizer, ml::StrategyOptions options, uint64_t seed,
                                                   const ml::Loss& loss) {
  options.devices = ml::parseDevices(devices);
  auto s = std::make_unique<ml::MirroredStrategy>(model, loss, ml::metricFor("", loss), optimizer, std::move(options));
  s->initialize(seed);
  return s;
}

}  // namespace mltest

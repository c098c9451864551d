// Building the mirrored strategies the tests train: an optimizer by name and a strategy from a model,
// devices and options, initialized with a fixed seed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "distribute/MirroredStrategy.h"
#include "nn/Loss.h"

namespace mltest {

// `name` at rate `lr`, with the momentum the mirrored tests use: 0.9 for sgd, 0.5 for rmsprop
// (so that both keep a slot), none for adam. The strategy reads no rate from it: each step is given
// its own (train()'s TrainOptions::lr).
ml::OptimizerSpec optimizer(const std::string& name, double lr = 0.01);

inline ml::Loss sparseCrossentropy() { return ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false); }

// A strategy over `devices` (ml::parseDevices' form, e.g. "cpu:3", "gpu:0x4"; it replaces
// options.devices), its weights initialized with `seed`; the metric is the loss's default (accuracy
// for classification, mae otherwise).
std::unique_ptr<ml::MirroredStrategy> makeStrategy(const ml::ModelSpec& model, const std::string& devices,
                                                   const ml::OptimizerSpec& optimizer, ml::StrategyOptions options = {},
                                                   uint64_t seed = 11, const ml::Loss& loss = sparseCrossentropy());

}  // namespace mltest

// The fixed Python of the TensorFlow program (internal to core/learn): the learning-rate schedule,
// the per-step loss, the callbacks, the strategy, Mirrorlab's shards fed to the replicas, the
// weights files and main().
#pragma once
#include <string>

namespace ml::codegen {

// The TensorFlow and Keras versions learn.tf_step_for_step ran the generated programs with.
inline constexpr const char* kTfVerified = "2.21.0";
inline constexpr const char* kKerasVerified = "3.15.1";

// Helpers: MirrorlabSchedule, StepLoss, the callbacks, require_keras, make_strategy (one worker's
// MirroredStrategy, or MultiWorkerMirroredStrategy when multiWorker), the shards and the weights files.
std::string tfHelpersPython(bool multiWorker, bool dropout);
// main(argv=None); the loss and metrics come from make_loss() and METRICS.
std::string tfMainPython(bool oneHotTargets, bool binaryTargets);

}  // namespace ml::codegen

// The equivalent program of a project in TensorFlow/Keras (tf.distribute.MirroredStrategy) or
// PyTorch (DistributedDataParallel): same layers, initialisers, optimizer, loss, batch and
// learning-rate rule, so a learner can see the mirrored step in the frameworks they will use.
#pragma once
#include <string>

#include "project/Project.h"

namespace ml {

enum class Framework { TensorFlow, PyTorch };

// "tf" | "tensorflow" | "keras" -> TensorFlow; "torch" | "pytorch" -> PyTorch; else UserError.
Framework parseFramework(const std::string& name);
const char* toString(Framework f);  // "tf" | "torch"

// A runnable Python 3 program. Throws UserError when the project's model does not build (the
// same message the studio shows at the layer).
std::string generateTensorFlowProgram(const Project& project);
std::string generatePyTorchProgram(const Project& project);
std::string generateProgram(const Project& project, Framework framework);

// A file name for the program: "spirals_mirrored_tf.py", "spirals_ddp_torch.py".
std::string suggestedFileName(const Project& project, Framework framework);

}  // namespace ml

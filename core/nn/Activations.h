// Element-wise activations and softmax, applied in place on (n, k) rows, and their backward
// expressed through the OUTPUT y (so no pre-activation needs to be stored).
#pragma once
#include <cstdint>
#include <string>

namespace ml {

enum class Act { Linear, Relu, Sigmoid, Tanh, Softmax };

// Throws UserError listing the allowed names.
Act parseActivation(const std::string& name, const std::string& where);
const char* toString(Act a);

// y = act(y) in place over n rows of k.
void activationForward(Act a, float* y, int64_t n, int64_t k);
// dz = dy * act'(.) from y; dz may alias dy.
void activationBackward(Act a, const float* y, const float* dy, float* dz, int64_t n, int64_t k);

}  // namespace ml

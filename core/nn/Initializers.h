// Keras' initialisers for a (fanIn, fanOut) kernel: glorot_uniform (default), glorot_normal,
// he_uniform, he_normal, zeros, ones. The *_normal ones are truncated at 2 std like Keras.
#pragma once
#include <cstdint>
#include <string>

namespace ml {

void validateInitializer(const std::string& name, const std::string& where);
void initialize(const std::string& name, float* w, int64_t count, int64_t fanIn, int64_t fanOut, uint64_t seed);

}  // namespace ml

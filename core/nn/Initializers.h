// Keras' initialisers for a (fanIn, fanOut) kernel: glorot_uniform (default), glorot_normal,
// he_uniform, he_normal, random_normal, random_uniform, zeros, ones. glorot_normal and he_normal
// are truncated at 2 std like Keras; random_normal (stddev 0.05) and random_uniform (+-0.05) take
// Keras' defaults and ignore the fans.
#pragma once
#include <cstdint>
#include <string>

namespace ml {

void validateInitializer(const std::string& name, const std::string& where);
void initialize(const std::string& name, float* w, int64_t count, int64_t fanIn, int64_t fanOut, uint64_t seed);

}  // namespace ml

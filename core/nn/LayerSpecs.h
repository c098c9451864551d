// Each layer kind's arguments as a plain struct (Keras' keyword arguments and defaults) and
// LayerArgs, the variant of them that a LayerSpec holds. A struct lists its arguments through
// fields(spec, f): f(key, member, need) once per argument, so the readers and writers above nn/
// (project files, Keras configs, the studio's form) need no code per kind. A new kind adds its
// struct here, one alternative to LayerArgs, and its registry entry (nn/LayerKind.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "nn/Activations.h"
#include "tensor/Shape.h"

namespace ml {

struct LayerKind;

// Keras' int-or-pair arguments (kernel_size, strides, pool_size): 3 means {3, 3}.
struct Pair {
  int64_t rows = 1, cols = 1;
  bool operator==(const Pair&) const = default;
};
enum class Padding { Valid, Same };
const char* toString(Padding p);  // "valid" | "same"
// An initializer by its Keras name (nn/Initializers.h lists them).
struct Initializer {
  std::string name;
  bool operator==(const Initializer&) const = default;
};
// A Required argument has no default: a file must give it (Dense's units).
enum class Need { Optional, Required };

struct DenseSpec {
  int64_t units = 64;
  Act activation = Act::Linear;
  bool useBias = true;
  Initializer kernelInitializer{"glorot_uniform"}, biasInitializer{"zeros"};
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("units", s.units, Need::Required);
    f("activation", s.activation, Need::Optional);
    f("use_bias", s.useBias, Need::Optional);
    f("kernel_initializer", s.kernelInitializer, Need::Optional);
    f("bias_initializer", s.biasInitializer, Need::Optional);
  }
  bool operator==(const DenseSpec&) const = default;
};

struct ActivationSpec {
  Act activation = Act::Relu;
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("activation", s.activation, Need::Required);
  }
  bool operator==(const ActivationSpec&) const = default;
};

struct FlattenSpec {
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S&, F&&) {}
  bool operator==(const FlattenSpec&) const = default;
};

struct DropoutSpec {
  double rate = 0.5;
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rate", s.rate, Need::Optional);
  }
  bool operator==(const DropoutSpec&) const = default;
};

struct Conv2DSpec {
  int64_t filters = 32;
  Pair kernelSize{3, 3};
  Pair strides{1, 1};
  Padding padding = Padding::Valid;
  Act activation = Act::Linear;
  bool useBias = true;
  Initializer kernelInitializer{"glorot_uniform"}, biasInitializer{"zeros"};
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("filters", s.filters, Need::Required);
    f("kernel_size", s.kernelSize, Need::Required);
    f("strides", s.strides, Need::Optional);
    f("padding", s.padding, Need::Optional);
    f("activation", s.activation, Need::Optional);
    f("use_bias", s.useBias, Need::Optional);
    f("kernel_initializer", s.kernelInitializer, Need::Optional);
    f("bias_initializer", s.biasInitializer, Need::Optional);
  }
  bool operator==(const Conv2DSpec&) const = default;
};

// MaxPooling2D and AveragePooling2D: strides left out are the pool size (Keras' None).
struct Pool2DArgs {
  Pair poolSize{2, 2};
  std::optional<Pair> strides;
  Padding padding = Padding::Valid;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("pool_size", s.poolSize, Need::Optional);
    f("strides", s.strides, Need::Optional);
    f("padding", s.padding, Need::Optional);
  }
  bool operator==(const Pool2DArgs&) const = default;
};
struct MaxPooling2DSpec : Pool2DArgs {
  static const LayerKind& kind();
};
struct AveragePooling2DSpec : Pool2DArgs {
  static const LayerKind& kind();
};

struct GlobalAveragePooling2DSpec {
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S&, F&&) {}
  bool operator==(const GlobalAveragePooling2DSpec&) const = default;
};

struct BatchNormalizationSpec {
  double momentum = 0.99, epsilon = 0.001;
  bool center = true, scale = true;
  bool synchronized = false;  // statistics over every replica's shard (nn/BatchNorm.h)
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("momentum", s.momentum, Need::Optional);
    f("epsilon", s.epsilon, Need::Optional);
    f("center", s.center, Need::Optional);
    f("scale", s.scale, Need::Optional);
    f("synchronized", s.synchronized, Need::Optional);
  }
  bool operator==(const BatchNormalizationSpec&) const = default;
};

struct ReshapeSpec {
  Shape targetShape{28, 28, 1};  // one entry may be -1 (inferred)
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("target_shape", s.targetShape, Need::Required);
  }
  bool operator==(const ReshapeSpec&) const = default;
};

// Keras 3's LeakyReLU (its negative_slope; Keras 2 called it alpha): x for x >= 0, slope * x below.
struct LeakyReLUSpec {
  double negativeSlope = 0.3;
  static const LayerKind& kind();
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("negative_slope", s.negativeSlope, Need::Optional);
  }
  bool operator==(const LeakyReLUSpec&) const = default;
};

// Every layer kind, in the palette's order.
using LayerArgs =
    std::variant<DenseSpec, ActivationSpec, FlattenSpec, DropoutSpec, Conv2DSpec, MaxPooling2DSpec, AveragePooling2DSpec,
                 GlobalAveragePooling2DSpec, BatchNormalizationSpec, ReshapeSpec, LeakyReLUSpec>;

// Calls f(key, member, need) for each argument of whichever kind args holds (args may be const).
template <class Args, class F>
void forEachArg(Args& args, F&& f) {
  std::visit([&](auto& spec) { std::decay_t<decltype(spec)>::fields(spec, f); }, args);
}

struct LayerSpec {
  std::string name;  // unique; generated ("dense_1") when empty
  LayerArgs args;
  const LayerKind& kind() const;
  std::string_view type() const;  // "Dense": the file's and Keras' type
  template <class T>
  const T* as() const {
    return std::get_if<T>(&args);
  }
  template <class T>
  T* as() {
    return std::get_if<T>(&args);
  }
  bool operator==(const LayerSpec&) const = default;
};

// The activation a kind applies through an "activation" argument (Dense, Conv2D, Activation).
std::optional<Act> activationOf(const LayerArgs& args);

}  // namespace ml

#include "nn/OneDnnConv.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <type_traits>

#include "nn/Bf16Gemm.h"

#if MIRRORLAB_HAVE_DNNL
#include <memory>

#include <unordered_map>
#include "nn/OneDnnContext.h"
#endif

namespace ml::dnnconv {

namespace {
std::atomic<bool> gForcedOff{false};
}

void forceOff(bool on) { gForcedOff.store(on); }

#if MIRRORLAB_HAVE_DNNL

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;

using onednn::engine;
using onednn::oneOpenMpThread;

struct Key {
  int64_t h, w, c, oh, ow, kh, kw, sh, sw, padTop, padLeft, f, n;
  bool bias, bf16;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = (k.bias ? 1u : 0u) | (k.bf16 ? 2u : 0u);
    for (int64_t v : {k.h, k.w, k.c, k.oh, k.ow, k.kh, k.kw, k.sh, k.sw, k.padTop, k.padLeft, k.f, k.n})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

Key keyOf(const Geometry& g, const Window& win, int64_t f, int64_t n, bool bias, bool bf16) {
  return {g.h, g.w, g.c, g.oh, g.ow, win.kh, win.kw, win.sh, win.sw, g.padTop, g.padLeft, f, n, bias, bf16};
}

// The descriptors of one shape: channels-last activations, Keras' kernel, any (blocked) kernel.
// float32: everything float32. bfloat16: the operands (input, kernel, output gradient) bfloat16,
// the results (output, kernel and bias gradients, input gradient) float32.
struct Descs {
  dnnl::memory::desc src, diffSrc, dst, diffDst, bias, kerasWeights, kerasDiffWeights, anyWeights, anyDiffWeights;
  dims strides, padL, padR;
  explicit Descs(const Key& k) : withBias(k.bias) {
    const dt op = k.bf16 ? dt::bf16 : dt::f32;
    src = dnnl::memory::desc(dims{k.n, k.c, k.h, k.w}, op, tag::nhwc);
    diffSrc = dnnl::memory::desc(dims{k.n, k.c, k.h, k.w}, dt::f32, tag::nhwc);
    dst = dnnl::memory::desc(dims{k.n, k.f, k.oh, k.ow}, dt::f32, tag::nhwc);
    diffDst = dnnl::memory::desc(dims{k.n, k.f, k.oh, k.ow}, op, tag::nhwc);
    bias = dnnl::memory::desc(dims{k.f}, dt::f32, tag::x);
    kerasWeights = dnnl::memory::desc(dims{k.f, k.c, k.kh, k.kw}, op, tag::hwio);
    kerasDiffWeights = dnnl::memory::desc(dims{k.f, k.c, k.kh, k.kw}, dt::f32, tag::hwio);
    anyWeights = dnnl::memory::desc(dims{k.f, k.c, k.kh, k.kw}, op, tag::any);
    anyDiffWeights = dnnl::memory::desc(dims{k.f, k.c, k.kh, k.kw}, dt::f32, tag::any);
    strides = {k.sh, k.sw};
    padL = {k.padTop, k.padLeft};
    // What is left below and right of the last window (TensorFlow's same padding puts the odd pixel there).
    padR = {std::max<int64_t>(0, (k.oh - 1) * k.sh + k.kh - k.h - k.padTop),
            std::max<int64_t>(0, (k.ow - 1) * k.sw + k.kw - k.w - k.padLeft)};
  }
  bool withBias;
  // The forward pass (output float32); with out = diffDst, the hint the backward passes are made from.
  dnnl::convolution_forward::primitive_desc forwardPd(const dnnl::memory::desc& out) const {
    using desc = dnnl::convolution_forward::desc;
    const auto prop = dnnl::prop_kind::forward_training;
    const auto algo = dnnl::algorithm::convolution_direct;
    return dnnl::convolution_forward::primitive_desc(withBias ? desc(prop, algo, src, anyWeights, bias, out, strides, padL, padR)
                                                              : desc(prop, algo, src, anyWeights, out, strides, padL, padR),
                                                     engine());
  }
  dnnl::convolution_forward::primitive_desc forwardPd() const { return forwardPd(dst); }
  dnnl::convolution_backward_weights::primitive_desc backwardWeightsPd(
      const dnnl::convolution_forward::primitive_desc& hint) const {
    using desc = dnnl::convolution_backward_weights::desc;
    const auto algo = dnnl::algorithm::convolution_direct;
    return dnnl::convolution_backward_weights::primitive_desc(
        withBias ? desc(algo, src, anyDiffWeights, bias, diffDst, strides, padL, padR)
                 : desc(algo, src, anyDiffWeights, diffDst, strides, padL, padR),
        engine(), hint);
  }
  dnnl::convolution_backward_data::primitive_desc backwardDataPd(const dnnl::convolution_forward::primitive_desc& hint) const {
    return dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, diffSrc, anyWeights, diffDst, strides, padL,
                                              padR),
        engine(), hint);
  }
};

struct Plan {
  explicit Plan(const Key& k) : d(k), fwdPd(d.forwardPd()), hintPd(k.bf16 ? d.forwardPd(d.diffDst) : fwdPd) {}
  Descs d;
  dnnl::convolution_forward::primitive_desc fwdPd, hintPd;
  // Built on first use of each pass.
  std::unique_ptr<dnnl::convolution_forward> fwd;
  std::unique_ptr<dnnl::memory> fwdWeights;
  std::unique_ptr<dnnl::convolution_backward_weights> bwdW;
  std::unique_ptr<dnnl::memory> bwdWeights;  // the kernel gradient in oneDNN's layout
  std::unique_ptr<dnnl::convolution_backward_data> bwdD;
  std::unique_ptr<dnnl::memory> dataWeights;
};

Plan& plan(const Key& k) {
  thread_local std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> plans;
  auto it = plans.find(k);
  if (it == plans.end()) it = plans.emplace(k, std::make_unique<Plan>(k)).first;
  return *it->second;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const void* p) { return dnnl::memory(md, engine(), const_cast<void*>(p)); }

// Its reference kernel, or its own im2col + gemm ("gemm:jit", what it falls back to without a
// direct kernel for channels-last data), measured slower than Conv2D's im2col path.
bool direct(const std::string& impl) { return impl.rfind("ref", 0) != 0 && impl.find("gemm") == std::string::npos; }

// The implementations oneDNN picks for the three passes of a shape ("" where it refuses one).
struct Impls {
  std::string forward, weights, data;
  bool allDirect() const { return direct(forward) && direct(weights) && direct(data); }
};
Impls implsOf(const Key& k) {
  Impls r;
  const Descs d(k);
  r.forward = d.forwardPd().impl_info_str();
  const auto hint = k.bf16 ? d.forwardPd(d.diffDst) : d.forwardPd();
  r.weights = d.backwardWeightsPd(hint).impl_info_str();
  r.data = d.backwardDataPd(hint).impl_info_str();
  return r;
}

struct Probe {
  bool ok = false;
  std::string description;
};

// fashion-cnn's second convolution at a small batch: the implementation oneDNN picks for it.
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    try {
      const Key k{13, 13, 32, 11, 11, 3, 3, 1, 1, 0, 0, 64, 8, true, false};
      const std::string impl = Descs(k).forwardPd().impl_info_str();
      r.ok = direct(impl);
      r.description = r.ok ? "oneDNN " + onednn::version() + " " + impl
                           : "im2col + OpenBLAS sgemm: oneDNN " + onednn::version() +
                                 " has no direct convolution on this CPU (it offers " + impl + ")";
    } catch (const dnnl::error& e) {
      r.description = std::string("im2col + OpenBLAS sgemm: oneDNN could not create a convolution (") + e.what() + ")";
    }
    return r;
  }();
  return p;
}

// The same for bfloat16, all three passes: oneDNN 2.6 has direct bfloat16 convolutions only with
// AVX512-BF16 or AMX (an AVX-512 CPU without them gets a slow emulation or its reference kernel).
const Probe& probeBf16() {
  static const Probe p = [] {
    Probe r;
    try {
      const Impls im = implsOf(Key{13, 13, 32, 11, 11, 3, 3, 1, 1, 0, 0, 64, 8, true, true});
      r.ok = im.allDirect() && im.forward.find("bf16") != std::string::npos;
      r.description = r.ok ? "oneDNN " + onednn::version() + " bfloat16 " + im.forward + " (backward " + im.weights + ")"
                           : "im2col + bfloat16 products on " + bf16::kernelDescription() + ": oneDNN " + onednn::version() +
                                 " has no direct bfloat16 convolution on this CPU (it offers " + im.forward + ", " + im.weights +
                                 ", " + im.data + ")";
    } catch (const dnnl::error& e) {
      r.description = "im2col + bfloat16 products on " + bf16::kernelDescription() +
                      ": oneDNN could not create a bfloat16 convolution (" + e.what() + ")";
    }
    return r;
  }();
  return p;
}

// Whether every pass of this layer's shape has a direct kernel (a shape the probe's layer does not
// stand for, e.g. one input channel, may get another implementation). Per thread, like the plans.
bool shapeDirect(const Geometry& g, const Window& win, int64_t filters, bool bf16) {
  thread_local std::unordered_map<Key, bool, KeyHash> known;
  const Key k = keyOf(g, win, filters, 8, true, bf16);
  auto it = known.find(k);
  if (it != known.end()) return it->second;
  bool ok = false;
  try {
    ok = implsOf(k).allDirect();
  } catch (const dnnl::error&) {
  }
  return known.emplace(k, ok).first->second;
}

// Shared by both types: Op is float or uint16_t (bfloat16 bits).
template <class Op>
void forwardImpl(const Geometry& g, const Window& win, int64_t filters, int64_t n, const Op* x, const Op* w, const float* bias,
                 float* y) {
  oneOpenMpThread();
  Plan& p = plan(keyOf(g, win, filters, n, bias != nullptr, std::is_same_v<Op, uint16_t>));
  if (!p.fwd) {
    p.fwd = std::make_unique<dnnl::convolution_forward>(p.fwdPd);
    p.fwdWeights = std::make_unique<dnnl::memory>(p.fwdPd.weights_desc(), engine());
  }
  auto& s = stream();
  auto keras = wrap(p.d.kerasWeights, w);
  dnnl::reorder(keras, *p.fwdWeights).execute(s, keras, *p.fwdWeights);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, wrap(p.d.src, x)}, {DNNL_ARG_WEIGHTS, *p.fwdWeights}, {DNNL_ARG_DST, wrap(p.d.dst, y)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, wrap(p.d.bias, bias));
  p.fwd->execute(s, args);
  s.wait();
}

template <class Op>
void backwardWeightsImpl(const Geometry& g, const Window& win, int64_t filters, int64_t n, const Op* x, const Op* dz, float* dw,
                         float* db) {
  oneOpenMpThread();
  Plan& p = plan(keyOf(g, win, filters, n, db != nullptr, std::is_same_v<Op, uint16_t>));
  if (!p.bwdW) {
    const auto pd = p.d.backwardWeightsPd(p.hintPd);
    p.bwdW = std::make_unique<dnnl::convolution_backward_weights>(pd);
    p.bwdWeights = std::make_unique<dnnl::memory>(pd.diff_weights_desc(), engine());
  }
  auto& s = stream();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, wrap(p.d.src, x)}, {DNNL_ARG_DIFF_DST, wrap(p.d.diffDst, dz)}, {DNNL_ARG_DIFF_WEIGHTS, *p.bwdWeights}};
  if (db) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(p.d.bias, db));
  p.bwdW->execute(s, args);
  auto keras = wrap(p.d.kerasDiffWeights, dw);
  dnnl::reorder(*p.bwdWeights, keras).execute(s, *p.bwdWeights, keras);
  s.wait();
}

template <class Op>
void backwardDataImpl(const Geometry& g, const Window& win, int64_t filters, int64_t n, const Op* dz, const Op* w, float* dx) {
  oneOpenMpThread();
  Plan& p = plan(keyOf(g, win, filters, n, true, std::is_same_v<Op, uint16_t>));
  if (!p.bwdD) {
    const auto pd = p.d.backwardDataPd(p.hintPd);
    p.bwdD = std::make_unique<dnnl::convolution_backward_data>(pd);
    p.dataWeights = std::make_unique<dnnl::memory>(pd.weights_desc(), engine());
  }
  auto& s = stream();
  auto keras = wrap(p.d.kerasWeights, w);
  dnnl::reorder(keras, *p.dataWeights).execute(s, keras, *p.dataWeights);
  p.bwdD->execute(s, {{DNNL_ARG_DIFF_DST, wrap(p.d.diffDst, dz)},
                      {DNNL_ARG_WEIGHTS, *p.dataWeights},
                      {DNNL_ARG_DIFF_SRC, wrap(p.d.diffSrc, dx)}});
  s.wait();
}

}  // namespace

bool available() { return !gForcedOff.load() && probe().ok; }
bool available(const Geometry& g, const Window& win, int64_t filters) {
  return available() && shapeDirect(g, win, filters, false);
}
bool availableBf16() { return !gForcedOff.load() && probeBf16().ok; }
bool availableBf16(const Geometry& g, const Window& win, int64_t filters) {
  return availableBf16() && shapeDirect(g, win, filters, true);
}

std::string description() {
  if (gForcedOff.load()) return "im2col + OpenBLAS sgemm (forced)";
  return probe().description;
}
std::string descriptionBf16() {
  if (gForcedOff.load()) return "im2col + bfloat16 products on " + bf16::kernelDescription() + " (forced)";
  return probeBf16().description;
}

void forward(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* x, const float* w, const float* bias,
             float* y) {
  forwardImpl(g, win, filters, n, x, w, bias, y);
}
void forward(const Geometry& g, const Window& win, int64_t filters, int64_t n, const uint16_t* x, const uint16_t* w,
             const float* bias, float* y) {
  forwardImpl(g, win, filters, n, x, w, bias, y);
}
void backwardWeights(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* x, const float* dz, float* dw,
                     float* db) {
  backwardWeightsImpl(g, win, filters, n, x, dz, dw, db);
}
void backwardWeights(const Geometry& g, const Window& win, int64_t filters, int64_t n, const uint16_t* x, const uint16_t* dz,
                     float* dw, float* db) {
  backwardWeightsImpl(g, win, filters, n, x, dz, dw, db);
}
void backwardData(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* dz, const float* w, float* dx) {
  backwardDataImpl(g, win, filters, n, dz, w, dx);
}
void backwardData(const Geometry& g, const Window& win, int64_t filters, int64_t n, const uint16_t* dz, const uint16_t* w,
                  float* dx) {
  backwardDataImpl(g, win, filters, n, dz, w, dx);
}

#else  // built without oneDNN

// available() is false, so Conv2D never calls these.
bool available() { return false; }
bool available(const Geometry&, const Window&, int64_t) { return false; }
bool availableBf16() { return false; }
bool availableBf16(const Geometry&, const Window&, int64_t) { return false; }
std::string description() { return "im2col + OpenBLAS sgemm: this Mirrorlab was built without oneDNN (libdnnl-dev)"; }
std::string descriptionBf16() {
  return "im2col + bfloat16 products on " + bf16::kernelDescription() + ": this Mirrorlab was built without oneDNN (libdnnl-dev)";
}
void forward(const Geometry&, const Window&, int64_t, int64_t, const float*, const float*, const float*, float*) {
  throw std::logic_error("dnnconv::forward without oneDNN");
}
void forward(const Geometry&, const Window&, int64_t, int64_t, const uint16_t*, const uint16_t*, const float*, float*) {
  throw std::logic_error("dnnconv::forward without oneDNN");
}
void backwardWeights(const Geometry&, const Window&, int64_t, int64_t, const float*, const float*, float*, float*) {
  throw std::logic_error("dnnconv::backwardWeights without oneDNN");
}
void backwardWeights(const Geometry&, const Window&, int64_t, int64_t, const uint16_t*, const uint16_t*, float*, float*) {
  throw std::logic_error("dnnconv::backwardWeights without oneDNN");
}
void backwardData(const Geometry&, const Window&, int64_t, int64_t, const float*, const float*, float*) {
  throw std::logic_error("dnnconv::backwardData without oneDNN");
}
void backwardData(const Geometry&, const Window&, int64_t, int64_t, const uint16_t*, const uint16_t*, float*) {
  throw std::logic_error("dnnconv::backwardData without oneDNN");
}

#endif

}  // namespace ml::dnnconv

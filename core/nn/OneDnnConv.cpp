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
  bool bias, bf16, relu = false;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = (k.bias ? 1u : 0u) | (k.bf16 ? 2u : 0u) | (k.relu ? 4u : 0u);
    for (int64_t v : {k.h, k.w, k.c, k.oh, k.ow, k.kh, k.kw, k.sh, k.sw, k.padTop, k.padLeft, k.f, k.n})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

Key keyOf(const Geometry& g, const Window& win, int64_t f, int64_t n, bool bias, bool bf16, bool relu = false) {
  return {g.h, g.w, g.c, g.oh, g.ow, win.kh, win.kw, win.sh, win.sw, g.padTop, g.padLeft, f, n, bias, bf16, relu};
}

// The descriptors of one shape: channels-last activations, Keras' kernel, any (blocked) kernel.
// float32: everything float32. bfloat16: the operands (input, kernel, output gradient) bfloat16,
// the results (output, kernel and bias gradients, input gradient) float32.
struct Descs {
  dnnl::memory::desc src, diffSrc, dst, diffDst, bias, kerasWeights, kerasDiffWeights, anyWeights, anyDiffWeights;
  dims strides, padL, padR;
  explicit Descs(const Key& k) : withBias(k.bias), relu(k.relu) {
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
  bool withBias, relu;
  // The forward pass (output float32), with ReLU as a post-op when asked (relu(x) = max(x, 0) is
  // exact, so the bits are those of the separate pass; oneDNN gives -0 where it gives +0, which
  // compares, adds and multiplies alike); with out = diffDst, the hint the backward passes are made from.
  dnnl::convolution_forward::primitive_desc forwardPd(const dnnl::memory::desc& out) const {
    using desc = dnnl::convolution_forward::desc;
    const auto prop = dnnl::prop_kind::forward_training;
    const auto algo = dnnl::algorithm::convolution_direct;
    dnnl::primitive_attr attr;
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    return dnnl::convolution_forward::primitive_desc(withBias ? desc(prop, algo, src, anyWeights, bias, out, strides, padL, padR)
                                                              : desc(prop, algo, src, anyWeights, out, strides, padL, padR),
                                                     attr, engine());
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

// A memory object over caller-owned data, its pointer set on every call.
dnnl::memory view(const dnnl::memory::desc& md) { return dnnl::memory(md, engine(), DNNL_MEMORY_NONE); }
void point(dnnl::memory& m, const void* p) { m.set_data_handle(const_cast<void*>(p)); }

// Everything one shape's passes need, made once per thread: the primitives, the reorders of the
// kernel between Keras' layout and oneDNN's (the process-wide primitive cache is off, so a reorder
// made per call was created, and JIT-compiled, on every call: 12% of a CNN step), and the memory
// objects that wrap the caller's buffers.
struct Plan {
  explicit Plan(const Key& k) : d(k), fwdPd(d.forwardPd()), hintPd(k.bf16 ? d.forwardPd(d.diffDst) : fwdPd) {}
  Descs d;
  dnnl::convolution_forward::primitive_desc fwdPd, hintPd;
  struct Forward {
    dnnl::convolution_forward conv;
    dnnl::memory src, keras, weights, bias, dst;
    dnnl::reorder toBlocked;
    std::unordered_map<int, dnnl::memory> args;
  };
  struct Weights {
    dnnl::convolution_backward_weights conv;
    dnnl::memory src, diffDst, diffWeights, diffBias, keras;
    dnnl::reorder toKeras;
    std::unordered_map<int, dnnl::memory> args;
  };
  struct Data {
    dnnl::convolution_backward_data conv;
    dnnl::memory diffDst, keras, weights, diffSrc;
    dnnl::reorder toBlocked;
    std::unordered_map<int, dnnl::memory> args;
  };
  // Built on first use of each pass.
  std::unique_ptr<Forward> fwd;
  std::unique_ptr<Weights> bwdW;
  std::unique_ptr<Data> bwdD;

  Forward& forward() {
    if (fwd) return *fwd;
    fwd = std::make_unique<Forward>();
    Forward& f = *fwd;
    f.conv = dnnl::convolution_forward(fwdPd);
    f.src = view(d.src);
    f.keras = view(d.kerasWeights);
    f.weights = dnnl::memory(fwdPd.weights_desc(), engine());
    f.dst = view(d.dst);
    f.toBlocked = dnnl::reorder(f.keras, f.weights);
    f.args = {{DNNL_ARG_SRC, f.src}, {DNNL_ARG_WEIGHTS, f.weights}, {DNNL_ARG_DST, f.dst}};
    if (d.withBias) {
      f.bias = view(d.bias);
      f.args.emplace(DNNL_ARG_BIAS, f.bias);
    }
    return f;
  }
  Weights& weights() {
    if (bwdW) return *bwdW;
    bwdW = std::make_unique<Weights>();
    Weights& w = *bwdW;
    const auto pd = d.backwardWeightsPd(hintPd);
    w.conv = dnnl::convolution_backward_weights(pd);
    w.src = view(d.src);
    w.diffDst = view(d.diffDst);
    w.diffWeights = dnnl::memory(pd.diff_weights_desc(), engine());
    w.keras = view(d.kerasDiffWeights);
    w.toKeras = dnnl::reorder(w.diffWeights, w.keras);
    w.args = {{DNNL_ARG_SRC, w.src}, {DNNL_ARG_DIFF_DST, w.diffDst}, {DNNL_ARG_DIFF_WEIGHTS, w.diffWeights}};
    if (d.withBias) {
      w.diffBias = view(d.bias);
      w.args.emplace(DNNL_ARG_DIFF_BIAS, w.diffBias);
    }
    return w;
  }
  Data& data() {
    if (bwdD) return *bwdD;
    bwdD = std::make_unique<Data>();
    Data& b = *bwdD;
    const auto pd = d.backwardDataPd(hintPd);
    b.conv = dnnl::convolution_backward_data(pd);
    b.diffDst = view(d.diffDst);
    b.keras = view(d.kerasWeights);
    b.weights = dnnl::memory(pd.weights_desc(), engine());
    b.diffSrc = view(d.diffSrc);
    b.toBlocked = dnnl::reorder(b.keras, b.weights);
    b.args = {{DNNL_ARG_DIFF_DST, b.diffDst}, {DNNL_ARG_WEIGHTS, b.weights}, {DNNL_ARG_DIFF_SRC, b.diffSrc}};
    return b;
  }
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
                 float* y, bool relu) {
  oneOpenMpThread();
  Plan::Forward& f = plan(keyOf(g, win, filters, n, bias != nullptr, std::is_same_v<Op, uint16_t>, relu)).forward();
  auto& s = stream();
  point(f.keras, w);
  f.toBlocked.execute(s, f.keras, f.weights);
  point(f.src, x);
  point(f.dst, y);
  if (bias) point(f.bias, bias);
  f.conv.execute(s, f.args);
  s.wait();
}

template <class Op>
void backwardWeightsImpl(const Geometry& g, const Window& win, int64_t filters, int64_t n, const Op* x, const Op* dz, float* dw,
                         float* db) {
  oneOpenMpThread();
  Plan::Weights& p = plan(keyOf(g, win, filters, n, db != nullptr, std::is_same_v<Op, uint16_t>)).weights();
  auto& s = stream();
  point(p.src, x);
  point(p.diffDst, dz);
  if (db) point(p.diffBias, db);
  p.conv.execute(s, p.args);
  point(p.keras, dw);
  p.toKeras.execute(s, p.diffWeights, p.keras);
  s.wait();
}

template <class Op>
void backwardDataImpl(const Geometry& g, const Window& win, int64_t filters, int64_t n, const Op* dz, const Op* w, float* dx) {
  oneOpenMpThread();
  Plan::Data& p = plan(keyOf(g, win, filters, n, true, std::is_same_v<Op, uint16_t>)).data();
  auto& s = stream();
  point(p.keras, w);
  p.toBlocked.execute(s, p.keras, p.weights);
  point(p.diffDst, dz);
  point(p.diffSrc, dx);
  p.conv.execute(s, p.args);
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
             float* y, bool relu) {
  forwardImpl(g, win, filters, n, x, w, bias, y, relu);
}
void forward(const Geometry& g, const Window& win, int64_t filters, int64_t n, const uint16_t* x, const uint16_t* w,
             const float* bias, float* y, bool relu) {
  forwardImpl(g, win, filters, n, x, w, bias, y, relu);
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
void forward(const Geometry&, const Window&, int64_t, int64_t, const float*, const float*, const float*, float*, bool) {
  throw std::logic_error("dnnconv::forward without oneDNN");
}
void forward(const Geometry&, const Window&, int64_t, int64_t, const uint16_t*, const uint16_t*, const float*, float*, bool) {
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

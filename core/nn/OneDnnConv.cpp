#include "nn/OneDnnConv.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#if MIRRORLAB_HAVE_DNNL
#include <dlfcn.h>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
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

// One OpenMP thread for the calling thread, set before every call (Bf16Gemm sets the same).
void oneOpenMpThread() {
  using SetThreads = void (*)(int);
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  thread_local bool done = false;
  if (set && !done) set(1);
  done = true;
}

// The process-wide primitive cache is off (Bf16Gemm.cpp says why): plans are per thread.
dnnl::engine& engine() {
  static dnnl::engine e = [] {
    dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

struct Key {
  int64_t h, w, c, oh, ow, kh, kw, sh, sw, padTop, padLeft, f, n;
  bool bias;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = k.bias ? 1u : 0u;
    for (int64_t v : {k.h, k.w, k.c, k.oh, k.ow, k.kh, k.kw, k.sh, k.sw, k.padTop, k.padLeft, k.f, k.n})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

Key keyOf(const Geometry& g, const Window& win, int64_t f, int64_t n, bool bias) {
  return {g.h, g.w, g.c, g.oh, g.ow, win.kh, win.kw, win.sh, win.sw, g.padTop, g.padLeft, f, n, bias};
}

// The descriptors of one shape: channels-last activations, Keras' kernel, any (blocked) kernel.
struct Descs {
  dnnl::memory::desc src, dst, bias, kerasWeights, anyWeights;
  dims strides, padL, padR;
  explicit Descs(const Key& k) : withBias(k.bias) {
    src = dnnl::memory::desc(dims{k.n, k.c, k.h, k.w}, dt::f32, tag::nhwc);
    dst = dnnl::memory::desc(dims{k.n, k.f, k.oh, k.ow}, dt::f32, tag::nhwc);
    bias = dnnl::memory::desc(dims{k.f}, dt::f32, tag::x);
    kerasWeights = dnnl::memory::desc(dims{k.f, k.c, k.kh, k.kw}, dt::f32, tag::hwio);
    anyWeights = dnnl::memory::desc(dims{k.f, k.c, k.kh, k.kw}, dt::f32, tag::any);
    strides = {k.sh, k.sw};
    padL = {k.padTop, k.padLeft};
    // What is left below and right of the last window (TensorFlow's same padding puts the odd pixel there).
    padR = {std::max<int64_t>(0, (k.oh - 1) * k.sh + k.kh - k.h - k.padTop),
            std::max<int64_t>(0, (k.ow - 1) * k.sw + k.kw - k.w - k.padLeft)};
  }
  bool withBias;
  dnnl::convolution_forward::primitive_desc forwardPd() const {
    using desc = dnnl::convolution_forward::desc;
    const auto prop = dnnl::prop_kind::forward_training;
    const auto algo = dnnl::algorithm::convolution_direct;
    return dnnl::convolution_forward::primitive_desc(withBias ? desc(prop, algo, src, anyWeights, bias, dst, strides, padL, padR)
                                                              : desc(prop, algo, src, anyWeights, dst, strides, padL, padR),
                                                     engine());
  }
};

struct Plan {
  explicit Plan(const Key& k) : d(k), fwdPd(d.forwardPd()) {}
  Descs d;
  dnnl::convolution_forward::primitive_desc fwdPd;
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

dnnl::memory wrap(const dnnl::memory::desc& md, const float* p) { return dnnl::memory(md, engine(), const_cast<float*>(p)); }

struct Probe {
  bool ok = false;
  std::string description;
};

// fashion-cnn's second convolution at a small batch: the implementation oneDNN picks for it.
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    try {
      const Key k{13, 13, 32, 11, 11, 3, 3, 1, 1, 0, 0, 64, 8, true};
      const std::string impl = Descs(k).forwardPd().impl_info_str();
      const dnnl_version_t* v = dnnl_version();
      const std::string version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
      // Its reference kernel, or its own im2col + gemm ("gemm:jit", what it falls back to without a
      // direct kernel for channels-last data), measured slower than Conv2D's im2col path.
      r.ok = impl.rfind("ref", 0) != 0 && impl.find("gemm") == std::string::npos;
      r.description =
          r.ok ? "oneDNN " + version + " " + impl
               : "im2col + OpenBLAS sgemm: oneDNN " + version + " has no direct convolution on this CPU (it offers " + impl + ")";
    } catch (const dnnl::error& e) {
      r.description = std::string("im2col + OpenBLAS sgemm: oneDNN could not create a convolution (") + e.what() + ")";
    }
    return r;
  }();
  return p;
}

}  // namespace

bool available() { return !gForcedOff.load() && probe().ok; }

std::string description() {
  if (gForcedOff.load()) return "im2col + OpenBLAS sgemm (forced)";
  return probe().description;
}

void forward(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* x, const float* w, const float* bias,
             float* y) {
  oneOpenMpThread();
  Plan& p = plan(keyOf(g, win, filters, n, bias != nullptr));
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

void backwardWeights(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* x, const float* dz, float* dw,
                     float* db) {
  oneOpenMpThread();
  Plan& p = plan(keyOf(g, win, filters, n, db != nullptr));
  if (!p.bwdW) {
    const dnnl::convolution_backward_weights::primitive_desc pd(
        db ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, p.d.src, p.d.anyWeights, p.d.bias,
                                                      p.d.dst, p.d.strides, p.d.padL, p.d.padR)
           : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, p.d.src, p.d.anyWeights, p.d.dst,
                                                      p.d.strides, p.d.padL, p.d.padR),
        engine(), p.fwdPd);
    p.bwdW = std::make_unique<dnnl::convolution_backward_weights>(pd);
    p.bwdWeights = std::make_unique<dnnl::memory>(pd.diff_weights_desc(), engine());
  }
  auto& s = stream();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, wrap(p.d.src, x)}, {DNNL_ARG_DIFF_DST, wrap(p.d.dst, dz)}, {DNNL_ARG_DIFF_WEIGHTS, *p.bwdWeights}};
  if (db) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(p.d.bias, db));
  p.bwdW->execute(s, args);
  auto keras = wrap(p.d.kerasWeights, dw);
  dnnl::reorder(*p.bwdWeights, keras).execute(s, *p.bwdWeights, keras);
  s.wait();
}

void backwardData(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* dz, const float* w, float* dx) {
  oneOpenMpThread();
  Plan& p = plan(keyOf(g, win, filters, n, true));
  if (!p.bwdD) {
    const dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, p.d.src, p.d.anyWeights, p.d.dst, p.d.strides,
                                              p.d.padL, p.d.padR),
        engine(), p.fwdPd);
    p.bwdD = std::make_unique<dnnl::convolution_backward_data>(pd);
    p.dataWeights = std::make_unique<dnnl::memory>(pd.weights_desc(), engine());
  }
  auto& s = stream();
  auto keras = wrap(p.d.kerasWeights, w);
  dnnl::reorder(keras, *p.dataWeights).execute(s, keras, *p.dataWeights);
  p.bwdD->execute(
      s, {{DNNL_ARG_DIFF_DST, wrap(p.d.dst, dz)}, {DNNL_ARG_WEIGHTS, *p.dataWeights}, {DNNL_ARG_DIFF_SRC, wrap(p.d.src, dx)}});
  s.wait();
}

#else  // built without oneDNN

// available() is false, so Conv2D never calls these.
bool available() { return false; }
std::string description() { return "im2col + OpenBLAS sgemm: this Mirrorlab was built without oneDNN (libdnnl-dev)"; }
void forward(const Geometry&, const Window&, int64_t, int64_t, const float*, const float*, const float*, float*) {
  throw std::logic_error("dnnconv::forward without oneDNN");
}
void backwardWeights(const Geometry&, const Window&, int64_t, int64_t, const float*, const float*, float*, float*) {
  throw std::logic_error("dnnconv::backwardWeights without oneDNN");
}
void backwardData(const Geometry&, const Window&, int64_t, int64_t, const float*, const float*, float*) {
  throw std::logic_error("dnnconv::backwardData without oneDNN");
}

#endif

}  // namespace ml::dnnconv

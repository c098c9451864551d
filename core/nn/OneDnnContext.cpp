// The shared oneDNN engine and thread setting (OneDnnContext.h).
#if MIRRORLAB_HAVE_DNNL
#include "nn/OneDnnContext.h"

#include <dlfcn.h>

namespace ml::onednn {

dnnl::engine& engine() {
  static dnnl::engine e = [] {
    dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

void oneOpenMpThread() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  using SetThreads = void (*)(int);
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set) set(1);
}

std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

void executeMatmul(const dnnl::matmul& prim, const dnnl::memory::desc& a, const void* A, const dnnl::memory::desc& b,
                   const void* B, const dnnl::memory::desc& c, void* C, const dnnl::memory::desc& bias, const float* biasValues) {
  thread_local dnnl::stream stream(engine());
  auto& eng = engine();
  dnnl::memory am(a, eng, const_cast<void*>(A)), bm(b, eng, const_cast<void*>(B)), cm(c, eng, C);
  if (biasValues) {
    dnnl::memory biasm(bias, eng, const_cast<float*>(biasValues));
    prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, cm}});
  } else {
    prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  }
  stream.wait();
}

}  // namespace ml::onednn
#endif

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

}  // namespace ml::onednn
#endif

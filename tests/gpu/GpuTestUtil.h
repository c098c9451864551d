// Shared by the GPU test binaries: point the plugin loader at the plugin this build made (unless
// the caller chose one with MIRRORLAB_CUDA_PLUGIN) before any test loads it — the process-wide
// loader looks only once.
#pragma once
#include <cstdlib>

namespace mlgputest {

[[maybe_unused]] inline const bool kPluginEnv = [] {
#ifdef MIRRORLAB_TEST_CUDA_PLUGIN
  setenv("MIRRORLAB_CUDA_PLUGIN", MIRRORLAB_TEST_CUDA_PLUGIN, 0);
#endif
  return true;
}();

}  // namespace mlgputest

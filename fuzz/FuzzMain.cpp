// libFuzzer entry point of one target, chosen at compile time (MIRRORLAB_FUZZ_TARGET).
#include <cstdlib>

#include "FuzzTargets.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mlfuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mlfuzz::NamedTarget* target = mlfuzz::findTarget(MIRRORLAB_FUZZ_TARGET);
  if (!target) std::abort();
  (void)target->run(data, size);
  return 0;
}

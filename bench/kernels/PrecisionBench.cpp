// Mixed precision's cost on the CPU: one Dense layer's forward + backward at batch 256 under each
// policy, at the shapes of the wide MLP (784-512-512-10, bench/e2e/wide-mlp.json), one thread.
// Read the ratio of each policy's time to float32's at the same shape, in the same run; the
// label says how the low format is computed on this machine. The fourth variant is mixed_bfloat16
// with the emulated kernel forced (nn/Bf16Gemm.h): where this CPU has a native bfloat16 kernel,
// variant 1 against it is what oneDNN gains.
#include <benchmark/benchmark.h>

#include <vector>

#include "nn/Bf16Gemm.h"
#include "nn/Dense.h"
#include "nn/Precision.h"
#include "random/Rng.h"

extern "C" void openblas_set_num_threads(int);

namespace {

void BM_DenseStep(benchmark::State& s) {
  const int64_t in = s.range(0), out = s.range(1), n = 256;
  const bool forceEmulated = s.range(2) == 3;
  const auto p = forceEmulated ? ml::Precision::MixedBfloat16 : static_cast<ml::Precision>(s.range(2));
  openblas_set_num_threads(1);
  ml::bf16::forceEmulated(forceEmulated);
  ml::Dense d(out, ml::Act::Relu);
  d.name = "dense";
  d.build({in});
  std::vector<float> params(static_cast<size_t>(d.paramCount())), grads(params.size());
  d.bind(params.data(), grads.data());
  d.initialize(1);
  d.setPrecision(p);
  std::vector<float> x(static_cast<size_t>(n * in)), y(static_cast<size_t>(n * out)), dy(y.size()), dx(x.size());
  ml::Rng r(2);
  for (float& v : x) v = static_cast<float>(r.uniform(-1, 1));
  std::vector<float> dy0(y.size());
  for (float& v : dy0) v = static_cast<float>(r.uniform(-1, 1));
  ml::StepContext ctx;
  ctx.training = true;
  for (auto _ : s) {
    d.forward(x.data(), y.data(), n, ctx);
    dy = dy0;  // backward overwrites it
    d.backward(x.data(), y.data(), dy.data(), dx.data(), n, ctx);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  const double flops = 3.0 * 2.0 * static_cast<double>(in * out * n);  // forward, dW and dx GEMMs
  s.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  s.SetLabel(std::string(ml::toString(p)) + (p == ml::Precision::Float32         ? ""
                                             : p == ml::Precision::MixedBfloat16 ? ": " + ml::bf16::kernelDescription()
                                                                                 : ": rounded operands, OpenBLAS sgemm"));
  ml::bf16::forceEmulated(false);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t p = 0; p < 4; ++p) {
    b->Args({784, 512, p});
    b->Args({512, 512, p});
    b->Args({512, 10, p});
  }
}

}  // namespace

BENCHMARK(BM_DenseStep)->Apply(shapes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
BENCHMARK_MAIN();

// Microbenchmarks of the main kernels at the shapes of the example models: Dense forward and
// backward, fused softmax-cross-entropy, the optimizer step, and raw sgemm as the ceiling.
// GFLOP/s are reported as counters so they can be read against the sgemm peak of the same run.
// Dense runs as one replica does: on T > 1 threads a ThreadTeam splits the work (BLAS single-
// threaded per part); the fifth argument picks backward's plan (0 = the one choosePlan() takes by
// shape, 1 = each GEMM split, 2 = the two GEMMs side by side, 3 = no team: OpenBLAS' own threads,
// the old way; with oneDNN forced it runs on one thread), and the label states the plan that ran
// and the one Auto chooses. Dense runs on the products of nn/Sgemm.h, each kernel forced ("onednn":
// its blocked matmul where the CPU has it; "openblas"), side by side; the kernel a run would choose
// is printed first ("Dense products on ..."). BM_GemmKernel times the three products of a Dense
// layer on each kernel alone, and BM_OneDnnMatmul is the oneDNN counterpart of BM_Sgemm's peak.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdio>
#include <optional>

#include "nn/Dense.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/Sgemm.h"
#include "nn/ThreadTeam.h"
#include "random/Rng.h"

extern "C" void openblas_set_num_threads(int);

namespace {

void fill(std::vector<float>& v, uint64_t seed) {
  ml::Rng r(seed);
  for (auto& x : v) x = static_cast<float>(r.uniform(-1, 1));
}

struct DenseFixture {
  ml::Dense d;
  std::vector<float> p, g, x, y, dy, dx;
  DenseFixture(int64_t in, int64_t out, int64_t n) : d(out, ml::Act::Relu) {
    d.name = "dense";
    d.build({in});
    p.resize(static_cast<size_t>(d.paramCount()));
    g.resize(p.size());
    d.bind(p.data(), g.data());
    d.initialize(1);
    x.resize(static_cast<size_t>(n * in));
    y.resize(static_cast<size_t>(n * out));
    dy.resize(y.size());
    dx.resize(x.size());
    fill(x, 2);
    fill(dy, 3);
  }
};

// The threads of the run: a team of range(3) with single-threaded BLAS, or (mode 3) OpenBLAS' pool.
struct Threads {
  std::unique_ptr<ml::ThreadTeam> team;
  std::unique_ptr<ml::ThreadTeam::Scope> scope;
  Threads(benchmark::State& s, bool backward) {
    const int t = static_cast<int>(s.range(3));
    const int64_t mode = s.range(4);
    const bool pool = mode == 3 || t == 1;
    openblas_set_num_threads(pool ? t : 1);
    if (!pool) {
      team = std::make_unique<ml::ThreadTeam>(t);
      scope = std::make_unique<ml::ThreadTeam::Scope>(team.get());
    }
    using P = ml::Dense::BackwardPlan;
    ml::Dense::forcePlan(mode == 1 ? P::Split : mode == 2 ? P::SideBySide : P::Auto);
    const P chosen = ml::Dense::choosePlan(s.range(0), s.range(1), s.range(2), t);
    const char* names[] = {"auto", "split", "side-by-side", "openblas-threads"};
    const bool choice = backward && t > 1 && mode != 3;
    s.SetLabel(std::string(names[mode]) +
               (choice ? std::string("; auto chooses ") + (chosen == P::SideBySide ? "side-by-side" : "split") : ""));
  }
  ~Threads() { ml::Dense::forcePlan(ml::Dense::BackwardPlan::Auto); }
};

// The products' kernel for one benchmark: OpenBLAS forced, oneDNN forced, or (nullopt) the preferred one.
struct Kernel {
  explicit Kernel(std::optional<ml::sgemm::Kernel> k) { ml::sgemm::force(k); }
  ~Kernel() { ml::sgemm::force(std::nullopt); }
};

void BM_DenseForward(benchmark::State& s, std::optional<ml::sgemm::Kernel> kernel) {
  Kernel k(kernel);
  Threads th(s, false);
  DenseFixture f(s.range(0), s.range(1), s.range(2));
  ml::StepContext ctx;
  for (auto _ : s) f.d.forward(f.x.data(), f.y.data(), s.range(2), ctx);
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(s.range(0) * s.range(1) * s.range(2)) * static_cast<double>(s.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_DenseBackward(benchmark::State& s, std::optional<ml::sgemm::Kernel> kernel) {
  Kernel k(kernel);
  Threads th(s, true);
  DenseFixture f(s.range(0), s.range(1), s.range(2));
  ml::StepContext ctx;
  f.d.forward(f.x.data(), f.y.data(), s.range(2), ctx);
  std::vector<float> dy = f.dy;
  for (auto _ : s) {
    std::copy(f.dy.begin(), f.dy.end(), dy.begin());
    f.d.backward(f.x.data(), f.y.data(), dy.data(), f.dx.data(), s.range(2), ctx);
  }
  s.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * static_cast<double>(s.range(0) * s.range(1) * s.range(2)) * static_cast<double>(s.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_Sgemm(benchmark::State& s) {
  openblas_set_num_threads(static_cast<int>(s.range(1)));
  const int n = static_cast<int>(s.range(0));
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  fill(a, 1);
  fill(b, 2);
  for (auto _ : s) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n, 0, c.data(), n);
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * static_cast<double>(n) * static_cast<double>(s.iterations()),
                                             benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The oneDNN matmul's 2048^3 peak, BM_Sgemm's counterpart: on 1 thread, or a team of range(1)
// threads each computing a block of rows (as a replica's team runs Dense: whole-width products).
void BM_OneDnnMatmul(benchmark::State& s) {
  if (!ml::sgemm::oneDnnAvailable()) {
    s.SkipWithError(("no oneDNN matmul: " + ml::sgemm::kernelDescription()).c_str());
    return;
  }
  Kernel k(ml::sgemm::Kernel::OneDnn);
  openblas_set_num_threads(1);
  const int64_t n = s.range(0);
  const int t = static_cast<int>(s.range(1));
  std::vector<float> a(static_cast<size_t>(n * n)), b(a.size()), c(a.size());
  fill(a, 1);
  fill(b, 2);
  ml::ThreadTeam team(t);
  ml::ThreadTeam::Scope scope(t > 1 ? &team : nullptr);
  auto rows = [&](int64_t lo, int64_t hi) {
    ml::sgemm::gemm(false, false, hi - lo, n, n, a.data() + lo * n, n, b.data(), n, c.data() + lo * n, n);
  };
  for (auto _ : s) {
    if (t > 1)
      team.split(n, rows);
    else
      rows(0, n);
  }
  s.SetLabel(ml::sgemm::kernelDescription());
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n) * static_cast<double>(s.iterations()),
                                             benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// One product of a Dense layer (in -> out, batch n) on one thread, range(3): 0 forward y = x W + b,
// 1 weight gradient dW += x^T dz, 2 input gradient dx = dz W^T, 3 the weight gradient written
// (dW = x^T dz, a step's first backward: OpenBLAS zeroes C in a pass of its own, oneDNN writes it);
// range(4): 0 oneDNN, 1 OpenBLAS, 2 neither forced (the kernel a run uses; the label names it).
void BM_GemmKernel(benchmark::State& s) {
  openblas_set_num_threads(1);
  const int64_t in = s.range(0), out = s.range(1), n = s.range(2), which = s.range(3);
  const int64_t kernel = s.range(4);
  Kernel k(kernel == 2   ? std::nullopt
           : kernel == 1 ? std::optional(ml::sgemm::Kernel::OpenBlas)
                         : std::optional(ml::sgemm::Kernel::OneDnn));
  if (kernel == 0 && !ml::sgemm::oneDnnAvailable()) {
    s.SkipWithError(("no oneDNN matmul: " + ml::sgemm::kernelDescription()).c_str());
    return;
  }
  std::vector<float> x(static_cast<size_t>(n * in)), w(static_cast<size_t>(in * out)), bias(static_cast<size_t>(out)),
      y(static_cast<size_t>(n * out)), dw(w.size());
  fill(x, 1);
  fill(w, 2);
  fill(y, 3);
  fill(bias, 4);
  struct Product {
    bool transA, transB;
    int64_t M, N, K, lda, ldb, ldc;
    const float *A, *B;
    float* C;
    bool accumulate;
    const float* bias;
  };
  const Product products[] = {
      {false, false, n, out, in, in, out, out, x.data(), w.data(), y.data(), false, bias.data()},  // y = x W + b
      {true, false, in, out, n, in, out, out, x.data(), y.data(), dw.data(), true, nullptr},       // dW += x^T dz
      {false, true, n, in, out, out, out, in, y.data(), w.data(), x.data(), false, nullptr},       // dx = dz W^T
      {true, false, in, out, n, in, out, out, x.data(), y.data(), dw.data(), false, nullptr},      // dW = x^T dz
  };
  const Product& p = products[which];
  for (auto _ : s) ml::sgemm::gemm(p.transA, p.transB, p.M, p.N, p.K, p.A, p.lda, p.B, p.ldb, p.C, p.ldc, p.accumulate, p.bias);
  const char* names[] = {"y = x W + b", "dW += x^T dz", "dx = dz W^T", "dW = x^T dz"};
  const bool dnn = ml::sgemm::kernelFor(p.transA, p.transB, p.M, p.N, p.K, p.lda, p.ldb, p.ldc, p.accumulate,
                                        p.bias != nullptr) == ml::sgemm::Kernel::OneDnn;
  s.SetLabel(std::string(names[which]) + " on " + (dnn ? ml::sgemm::kernelDescription() : "OpenBLAS sgemm"));
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(in * out * n) * static_cast<double>(s.iterations()),
                                             benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_SoftmaxCrossEntropy(benchmark::State& s) {
  const int64_t n = s.range(0), k = 10;
  std::vector<float> p(static_cast<size_t>(n * k)), y(static_cast<size_t>(n)), g(p.size());
  fill(p, 4);
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % k);
  ml::Loss loss = ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, true);
  for (auto _ : s) benchmark::DoNotOptimize(loss.compute(p.data(), y.data(), n, k, g.data()));
  s.SetItemsProcessed(s.iterations() * n);
}

void BM_OptimizerStep(benchmark::State& s, const char* name) {
  const int64_t n = s.range(0);
  ml::OptimizerSpec spec;
  spec.kind = *ml::optimizerKindNamed(name);
  spec.momentum = std::string(name) == "sgd" ? 0.9 : 0.0;
  auto opt = ml::Optimizer::make(spec, n);
  std::vector<float> p(static_cast<size_t>(n)), g(p.size());
  fill(p, 5);
  fill(g, 6);
  for (auto _ : s) opt->step(p, g, 1.0f / 128, 0.001f);
  s.SetItemsProcessed(s.iterations() * n);
  s.SetBytesProcessed(s.iterations() * n * 4 * 4);
}

}  // namespace

// {in, out, batch, threads, mode}: the default MLP (784-128, 128-10 at 128) and 784-512-512-10 at 256;
// on 2 threads every plan, so the choice is read off the same run.
#define DENSE_SHAPES(B)                                            \
  B->Args({784, 128, 128, 1, 0})                                   \
      ->Args({128, 10, 128, 1, 0})                                 \
      ->Args({784, 512, 256, 1, 0})                                \
      ->Args({512, 512, 256, 1, 0})                                \
      ->Args({512, 10, 256, 1, 0})                                 \
      ->Args({784, 512, 128, 1, 0})                                \
      ->Args({512, 512, 128, 1, 0})                                \
      ->ArgsProduct({{784}, {128}, {128}, {2}, {0, 1, 2, 3}})      \
      ->ArgsProduct({{784, 512}, {512}, {256}, {2}, {0, 1, 2, 3}}) \
      ->ArgsProduct({{512}, {10}, {256}, {2}, {0, 1, 2, 3}})       \
      ->ArgsProduct({{2048}, {2048}, {512}, {2}, {0, 1, 2, 3}})
// Wall time: on several threads the caller's CPU time alone would flatter every figure.
DENSE_SHAPES(BENCHMARK_CAPTURE(BM_DenseForward, onednn, ml::sgemm::Kernel::OneDnn)->UseRealTime());
DENSE_SHAPES(BENCHMARK_CAPTURE(BM_DenseForward, openblas, ml::sgemm::Kernel::OpenBlas)->UseRealTime());
DENSE_SHAPES(BENCHMARK_CAPTURE(BM_DenseBackward, onednn, ml::sgemm::Kernel::OneDnn)->UseRealTime());
DENSE_SHAPES(BENCHMARK_CAPTURE(BM_DenseBackward, openblas, ml::sgemm::Kernel::OpenBlas)->UseRealTime());
BENCHMARK(BM_Sgemm)->Args({2048, 1})->Args({2048, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OneDnnMatmul)->Args({2048, 1})->Args({2048, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
// {in, out, batch, product, kernel}: the products of both MLPs' layers, oneDNN and OpenBLAS.
BENCHMARK(BM_GemmKernel)
    ->ArgsProduct({{784}, {512}, {256}, {0, 1, 2}, {0, 1}})
    ->ArgsProduct({{512}, {512}, {256}, {0, 1, 2}, {0, 1}})
    ->ArgsProduct({{784, 512}, {512}, {128, 256}, {3}, {0, 1, 2}})
    ->ArgsProduct({{784, 512}, {512}, {128}, {0, 1, 2}, {0, 1}})
    ->ArgsProduct({{512}, {10}, {256}, {0, 1, 2}, {0, 1}})
    ->ArgsProduct({{784}, {128}, {128}, {0, 1, 2}, {0, 1}})
    ->ArgsProduct({{128}, {10}, {128}, {0, 1, 2}, {0, 1}});
BENCHMARK(BM_SoftmaxCrossEntropy)->Arg(128)->Arg(256);
BENCHMARK_CAPTURE(BM_OptimizerStep, adam, "adam")->Arg(101770)->Arg(669706);
BENCHMARK_CAPTURE(BM_OptimizerStep, sgd_momentum, "sgd")->Arg(101770)->Arg(669706);
BENCHMARK_CAPTURE(BM_OptimizerStep, rmsprop, "rmsprop")->Arg(101770)->Arg(669706);
int main(int argc, char** argv) {
  std::fprintf(stderr, "Dense products on %s\n", ml::sgemm::kernelDescription().c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

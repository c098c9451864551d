// What every oneDNN caller in nn/ shares (Bf16Gemm, Sgemm, OneDnnConv): one CPU engine with the
// process-wide primitive cache off, and one OpenMP thread per calling thread. Included only where
// MIRRORLAB_HAVE_DNNL is 1.
//
// The replicas (and a replica's ThreadTeam) are the parallelism: Debian's oneDNN uses OpenMP and
// would start a team per calling thread, so each thread that calls it asks for one thread, through
// libgomp's per-thread setting (looked up, so that nothing else in Mirrorlab links OpenMP). Every
// thread keeps its own primitives ("plans"), so the primitive cache would only share them between
// threads behind its lock, and ThreadSanitizer, which cannot see into the uninstrumented library's
// locking, reports its lookups as races with other threads' inserts.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

namespace ml::onednn {

dnnl::engine& engine();
// Call before the thread's first oneDNN call (cheap after the first).
void oneOpenMpThread();
// "2.6.3"
std::string version();
// Runs a matmul primitive on this thread's stream over caller-owned buffers described by a, b, c
// (and bias, when given) and waits for it.
void executeMatmul(const dnnl::matmul& prim, const dnnl::memory::desc& a, const void* A, const dnnl::memory::desc& b,
                   const void* B, const dnnl::memory::desc& c, void* C, const dnnl::memory::desc& bias, const float* biasValues);

}  // namespace ml::onednn

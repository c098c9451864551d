// Run-time dispatch of the few element-wise loops whose speed depends on the vector width.
//
// The default Release build targets the x86-64 baseline (SSE2), so one binary runs on any x86-64
// machine. Measured on the development machine (bench/e2e/ab.sh, 2026-12-04), most loops lose
// nothing to that, but Adam's update (a square root and a division per parameter) runs twice as
// fast with AVX2 and was 10-18% of a small-MLP step; SGD's and RMSprop's loops are dispatched
// alike. A function marked ML_DISPATCH_X86 is compiled twice, for the baseline and for x86-64-v3
// (AVX2, FMA), and the loader picks the version the CPU supports (GCC/clang target_clones, an ifunc).
//
// The core is built with -ffp-contract=off in every build type, so the AVX2 version computes the
// same bits as the baseline one (no fused multiply-add where the source has a multiply and an
// add): a run gives the same numbers on every x86-64 machine and in the MIRRORLAB_NATIVE build.
// Clones exist only where the baseline lacks AVX2; virtual functions cannot be cloned, so the
// loops are free functions that the optimizers call.
#pragma once

// Not under the sanitizers: the loader runs an ifunc's resolver before their runtimes start, and
// the instrumented resolver crashes there (seen with ThreadSanitizer at program start).
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ML_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ML_SANITIZED 1
#endif

#if defined(__x86_64__) && !defined(__AVX2__) && (defined(__GNUC__) || defined(__clang__)) && !defined(MIRRORLAB_NO_DISPATCH) && \
    !defined(ML_SANITIZED)
#define ML_DISPATCH_X86 __attribute__((target_clones("default", "arch=x86-64-v3")))
// Compute-bound loops (a small convolution's multiply-adds) gain from AVX-512's width as well; the
// same -ffp-contract=off keeps every clone's bits equal.
#define ML_DISPATCH_X86_WIDE __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define ML_DISPATCH_X86
#define ML_DISPATCH_X86_WIDE
#endif

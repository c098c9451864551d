// The data movement around cuDNN's convolutions: Keras' kernel layout to cuDNN's and the kernel
// gradient back (a matrix transpose: HWIO is a (kh*kw*c, filters) matrix, KRSC its transpose), and
// the explicit zero padding of TensorFlow's asymmetric "same" padding (the input padded into scratch,
// the input gradient cropped out of a padded one). Pure copies and one add per element: exact.
#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

__device__ __forceinline__ int64_t firstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

constexpr int kTile = 32, kTileRows = 8;
constexpr unsigned kMaxTileBlocks = 4096;

// dst (cols, rows) = src (rows, cols)^T, or dst += src^T when add: 32x32 tiles through shared memory
// (reads and writes both coalesced), the tiles grid-strided in both directions. Each element of dst
// is written by one thread once.
__global__ void transposeKernel(const float* src, float* dst, int64_t rows, int64_t cols, bool add) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t tilesR = (rows + kTile - 1) / kTile, tilesC = (cols + kTile - 1) / kTile;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int64_t tr = blockIdx.y; tr < tilesR; tr += gridDim.y)
    for (int64_t tc = blockIdx.x; tc < tilesC; tc += gridDim.x) {
      const int64_t r0 = tr * kTile, c0 = tc * kTile;
      for (int k = ty; k < kTile; k += kTileRows) {
        const int64_t r = r0 + k, c = c0 + tx;
        if (r < rows && c < cols) tile[k][tx] = src[r * cols + c];
      }
      __syncthreads();
      for (int k = ty; k < kTile; k += kTileRows) {
        const int64_t c = c0 + k, r = r0 + tx;  // dst row c, column r
        if (r < rows && c < cols) {
          const float v = tile[tx][k];
          float* d = dst + c * rows + r;
          *d = add ? *d + v : v;
        }
      }
      __syncthreads();  // the tile is reused by the next iteration
    }
}

// xp (n, hp, wp, c): x where (y - top, x - left) lies inside the image, zero elsewhere.
__global__ void padKernel(const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
                          int64_t hp, int64_t wp) {
  const int64_t total = n * hp * wp * c;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t ch = i % c;
    int64_t t = i / c;
    const int64_t px = t % wp;
    t /= wp;
    const int64_t py = t % hp, s = t / hp;
    const int64_t iy = py - top, ix = px - left;
    xp[i] = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[((s * h + iy) * w + ix) * c + ch] : 0.0f;
  }
}

// x (n, h, w, c) = xp (n, hp, wp, c) at (y + top, x + left).
__global__ void cropKernel(const float* xp, float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
                           int64_t hp, int64_t wp) {
  const int64_t total = n * h * w * c;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t ch = i % c;
    int64_t t = i / c;
    const int64_t ix = t % w;
    t /= w;
    const int64_t iy = t % h, s = t / h;
    x[i] = xp[((s * hp + iy + top) * wp + ix + left) * c + ch];
  }
}

void transposeLaunch(cudaStream_t s, const float* src, float* dst, int64_t rows, int64_t cols, bool add) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t tilesR = (rows + kTile - 1) / kTile, tilesC = (cols + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(tilesC < kMaxTileBlocks ? tilesC : kMaxTileBlocks),
                  static_cast<unsigned>(tilesR < 65535 ? tilesR : 65535));
  transposeKernel<<<grid, dim3(kTile, kTileRows), 0, s>>>(src, dst, rows, cols, add);
}

}  // namespace

void transpose(cudaStream_t s, const float* src, float* dst, int64_t rows, int64_t cols) {
  transposeLaunch(s, src, dst, rows, cols, false);
}

void addTransposed(cudaStream_t s, const float* src, float* dst, int64_t rows, int64_t cols) {
  transposeLaunch(s, src, dst, rows, cols, true);
}

void padImages(cudaStream_t s, const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
               int64_t hp, int64_t wp) {
  padKernel<<<gridFor(n * hp * wp * c), kThreads, 0, s>>>(x, xp, n, h, w, c, top, left, hp, wp);
}

void cropImages(cudaStream_t s, const float* xp, float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
                int64_t hp, int64_t wp) {
  cropKernel<<<gridFor(n * h * w * c), kThreads, 0, s>>>(xp, x, n, h, w, c, top, left, hp, wp);
}

}  // namespace mlcuda::kernels

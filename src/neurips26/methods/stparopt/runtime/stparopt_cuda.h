/* STParOpt CUDA portability header (ours). Generated .cu files include only this header.
 *
 * Under nvcc (__CUDACC__) it adds the launch macro and the buffer helpers, nothing else.
 * Elsewhere (g++ -fopenmp -x c++) it is a small CUDA-on-CPU shim:
 *   - a grid is a loop over blocks (in shuffled order when STP_SHIM_SHUFFLE=1, the default);
 *   - a block is an OpenMP team of blockDim.x threads, __syncthreads() is an OpenMP barrier, and
 *     __shared__ is team-shared storage; threadIdx is thread-local and assigned through a random
 *     permutation so thread start order never follows threadIdx;
 *   - kernels without __syncthreads may run their threads one after another in a shuffled order
 *     (STP_SHIM_SEQUENTIAL), which exposes a race deterministically for a given STP_SHIM_SEED;
 *   - atomics are OpenMP atomics; cudaMalloc/cudaMemcpy/cudaFree map to malloc/memcpy/free.
 * Every launch goes through STP_LAUNCH(kernel, blocks, threads, args...), which is kernel<<<>>> under nvcc.
 */
#ifndef STPAROPT_CUDA_H
#define STPAROPT_CUDA_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __CUDACC__
#define STP_LAUNCH(kernel, blocks, threads, ...) kernel<<<(blocks), (threads)>>>(__VA_ARGS__)
#define STP_CHECK(call)                                                                          \
  do { cudaError_t stp_e_ = (call); if (stp_e_ != cudaSuccess) { fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(stp_e_), __FILE__, __LINE__); exit(2); } } while (0)
#else
#include <math.h>
#include <omp.h>
#include <algorithm>
#include <functional>
#include <vector>
using std::max;
using std::min;

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
static dim3 gridDim, blockDim, blockIdx;
static thread_local dim3 threadIdx;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
typedef int cudaError_t;
#define cudaSuccess 0
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
static inline cudaError_t cudaMalloc(void **p, size_t bytes) { *p = calloc(bytes ? bytes : 1, 1); return *p ? 0 : 2; }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, cudaMemcpyKind) { memmove(d, s, bytes); return 0; }
static inline cudaError_t cudaMemset(void *d, int v, size_t bytes) { memset(d, v, bytes); return 0; }
static inline cudaError_t cudaFree(void *p) { free(p); return 0; }
static inline cudaError_t cudaDeviceSynchronize(void) { return 0; }
static inline cudaError_t cudaGetLastError(void) { return 0; }
static inline const char *cudaGetErrorString(cudaError_t) { return "shim"; }
#define STP_CHECK(call) (void)(call)

static int stp_shim_sequential = 0;
static inline void __syncthreads(void) {
  if (stp_shim_sequential) { fprintf(stderr, "shim: __syncthreads in sequential mode\n"); abort(); }
#pragma omp barrier
}
template <typename T> static inline T atomicAdd(T *address, T value) {
  T old;
#pragma omp atomic capture
  { old = *address; *address += value; }
  return old;
}
template <typename T> static inline T atomicExch(T *address, T value) {
  T old;
#pragma omp critical(stp_atomic)
  { old = *address; *address = value; }
  return old;
}

static unsigned long long stp_shim_state = 0;
static inline unsigned long long stp_shim_random(void) {
  unsigned long long z = (stp_shim_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline std::vector<unsigned> stp_shim_order(unsigned count, int shuffle) {
  std::vector<unsigned> order(count);
  for (unsigned k = 0; k < count; k++) order[k] = k;
  if (shuffle)
    for (unsigned k = count; k > 1; k--) { unsigned j = (unsigned)(stp_shim_random() % k); unsigned t = order[k - 1]; order[k - 1] = order[j]; order[j] = t; }
  return order;
}
static inline void stp_shim_launch(unsigned blocks, unsigned threads, const std::function<void()> &body) {
  const char *seed = getenv("STP_SHIM_SEED"), *shuffle_env = getenv("STP_SHIM_SHUFFLE"), *seq = getenv("STP_SHIM_SEQUENTIAL");
  if (!stp_shim_state) stp_shim_state = seed ? strtoull(seed, 0, 10) + 1 : 12345;
  int shuffle = shuffle_env ? atoi(shuffle_env) : 1;
  stp_shim_sequential = seq ? atoi(seq) : 0;
  if (blocks == 0 || threads == 0) return;
  gridDim = dim3(blocks); blockDim = dim3(threads);
  std::vector<unsigned> block_order = stp_shim_order(blocks, shuffle);
  for (unsigned b = 0; b < blocks; b++) {
    blockIdx = dim3(block_order[b]);
    std::vector<unsigned> thread_order = stp_shim_order(threads, shuffle);
    if (stp_shim_sequential) {
      for (unsigned t = 0; t < threads; t++) { threadIdx = dim3(thread_order[t]); body(); }
    } else {
#pragma omp parallel num_threads(threads)
      {
        threadIdx = dim3(thread_order[omp_get_thread_num()]);
        body();
      }
    }
  }
}
#define STP_LAUNCH(kernel, blocks, threads, ...) stp_shim_launch((unsigned)(blocks), (unsigned)(threads), [&]() { kernel(__VA_ARGS__); })
#endif

/* Device buffers for host arrays: arguments whose host ranges overlap share one device buffer, so
 * aliasing between pointer arguments is preserved on the device. */
#define STP_MAX_ARGS 64
typedef struct {
  int count, owner[STP_MAX_ARGS];
  void *buffer[STP_MAX_ARGS];
  char *lo[STP_MAX_ARGS];
  size_t size[STP_MAX_ARGS];
} stp_buffers_t;

static void stp_map_buffers(stp_buffers_t *m, int count, void *const *host, const size_t *bytes, void **device) {
  m->count = count;
  for (int k = 0; k < count; k++) m->owner[k] = -1;
  for (int k = 0; k < count; k++) {
    if (m->owner[k] >= 0) continue;
    char *lo = (char *)host[k], *hi = lo + bytes[k];
    m->owner[k] = k;
    for (int grew = 1; grew;) {
      grew = 0;
      for (int j = 0; j < count; j++) {
        char *a = (char *)host[j], *b = a + bytes[j];
        if (m->owner[j] < 0 && a < hi && lo < b) { lo = a < lo ? a : lo; hi = b > hi ? b : hi; m->owner[j] = k; grew = 1; }
      }
    }
    void *buffer = 0;
    STP_CHECK(cudaMalloc(&buffer, (size_t)(hi - lo) + 1));
    STP_CHECK(cudaMemcpy(buffer, lo, (size_t)(hi - lo), cudaMemcpyHostToDevice));
    m->buffer[k] = buffer; m->lo[k] = lo; m->size[k] = (size_t)(hi - lo);
    for (int j = 0; j < count; j++)
      if (m->owner[j] == k) device[j] = (char *)buffer + ((char *)host[j] - lo);
  }
}

static void stp_unmap_buffers(stp_buffers_t *m) {
  for (int k = 0; k < m->count; k++)
    if (m->owner[k] == k) {
      STP_CHECK(cudaMemcpy(m->lo[k], m->buffer[k], m->size[k], cudaMemcpyDeviceToHost));
      STP_CHECK(cudaFree(m->buffer[k]));
    }
}

/* Inspector: 0 when no address is touched by two different iterations; 1 when the only sharing is
 * between commutative updates (safe with atomics); 2 when two iterations touch one address and one of
 * them writes or reads it plainly (run the loop serially).
 * Entries: (address, iteration, kind 0 read / 1 write / 2 update). */
typedef struct { long address, iteration; int kind; } stp_touch_t;
static int stp_touch_compare(const void *x, const void *y) {
  const stp_touch_t *a = (const stp_touch_t *)x, *b = (const stp_touch_t *)y;
  return a->address < b->address ? -1 : a->address > b->address ? 1 : (a->iteration < b->iteration ? -1 : a->iteration > b->iteration);
}
static int stp_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  return (const char *)a < (const char *)b + b_bytes && (const char *)b < (const char *)a + a_bytes;
}
static int stp_inspect_conflicts(stp_touch_t *touches, long count) {
  int verdict = 0;
  qsort(touches, (size_t)count, sizeof(stp_touch_t), stp_touch_compare);
  for (long s = 0; s < count;) {
    long e = s;
    int plain = 0;
    while (e < count && touches[e].address == touches[s].address) { plain += touches[e].kind != 2; e++; }
    if (touches[e - 1].iteration != touches[s].iteration) {
      int writes = 0;
      for (long k = s; k < e; k++) writes += touches[k].kind != 0;
      if (writes && plain) return 2;
      if (writes) verdict = 1;
    }
    s = e;
  }
  return verdict;
}
#endif

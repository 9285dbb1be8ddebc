/* STParOpt input generation (ours): deterministic fills shared by the profiler, the exhaustive label
 * check and the CUDA-on-CPU verification driver. */
#ifndef STP_INPUTS_H
#define STP_INPUTS_H
#include <stdint.h>
#include <stdlib.h>

static inline uint64_t stp_input_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* uniform values in [0, 1) for floating types, [0, 100) for integers */
#define STP_FILL_UNIFORM(type, x, m, state)                                                  \
  do { for (long k_ = 0; k_ < (m); k_++) (x)[k_] = (type)((stp_input_random(state) >> 11) * (1.0 / 9007199254740992.0) * (((type)0.5 == 0) ? 100.0 : 1.0)); } while (0)
/* a permutation of 0..m-1 (injective index) */
static void stp_fill_perm(int *x, long m, uint64_t *state) {
  for (long k = 0; k < m; k++) x[k] = (int)k;
  for (long k = m - 1; k > 0; k--) { long j = (long)(stp_input_random(state) % (uint64_t)(k + 1)); int t = x[k]; x[k] = x[j]; x[j] = t; }
}
/* indices drawn with replacement from 0..range-1 (repeats, not injective) */
static void stp_fill_repeats(int *x, long m, long range, uint64_t *state) {
  for (long k = 0; k < m; k++) x[k] = (int)(stp_input_random(state) % (uint64_t)(range > 0 ? range : 1));
}
#endif

/* STParOpt execution profiler runtime (ours): included by instrumented C sources.
 *
 * Every array/pointer access of the profiled loop is rewritten to *STP_ACC(site, kind, &(access)),
 * which records the address and returns it. Per access site: a stride histogram (0, +1, -1, constant,
 * irregular, in elements), the address range and a reservoir sample (Algorithm R) of element offsets.
 * Cross-iteration RAW/WAR/WAW are counted on a shadow table of *sampled* addresses: an address is
 * admitted when its hash is below a threshold, and the threshold halves when the table fills, so memory
 * stays bounded whatever the trip count (counts are rescaled by the sampling rate).
 * Two commutative updates (+=, -=, ++) of the same address never conflict (they map to atomics).
 * stp_exhaustive = 1 (argv "exhaustive") grows the table instead of sampling: the exact check used
 * to confirm labels.
 * STP_PLAIN turns every hook into nothing (the uninstrumented reference run).
 */
#ifndef STP_PROFILE_H
#define STP_PROFILE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STP_READ 0
#define STP_WRITE 1
#define STP_UPDATE 2
#define STP_RW 3
#ifndef STP_MAX_SITES
#define STP_MAX_SITES 64
#endif
#ifndef STP_RESERVOIR
#define STP_RESERVOIR 32
#endif
#ifndef STP_SHADOW
#define STP_SHADOW 4096
#endif
#ifndef STP_WARM
#define STP_WARM 4096
#endif
#ifndef STP_BURST_LOG
#define STP_BURST_LOG 8
#endif
#ifndef STP_GAP_LOG
#define STP_GAP_LOG 5
#endif

#ifdef STP_PLAIN
#define STP_ACC(site, kind, ptr) (ptr)
#define STP_ITER() ((void)0)
#else
#define STP_ACC(site, kind, ptr)                                                     \
  ({                                                                                \
    __typeof__(ptr) stp_p_ = (ptr);                                                 \
    if (__builtin_expect(stp_on, 0)) stp_record((site), (kind), (uintptr_t)stp_p_, sizeof(*stp_p_)); \
    stp_p_;                                                                         \
  })
/* Bursty tracing: every iteration up to STP_WARM, then bursts of 2^STP_BURST_LOG iterations, one in
 * 2^STP_GAP_LOG: the run costs a branch per access outside bursts. */
#define STP_ITER() (stp_iter++, stp_on = stp_exhaustive || stp_iter <= STP_WARM || ((stp_iter >> STP_BURST_LOG) & ((1L << STP_GAP_LOG) - 1)) == 0, stp_observed += stp_on)
#endif

typedef struct {
  long count, kinds[4];
  long hist[5]; /* zero, +1, -1, constant, irregular */
  uintptr_t prev, lo, hi;
  long prev_stride, elem;
  int seen, have_stride, count_seen;
  long res[STP_RESERVOIR];
  long res_n, prev_gap;
} stp_site_t;

typedef struct {
  uintptr_t addr; /* 0: empty */
  long r_cur, r_before, w_cur, w_before, u_cur, u_before;
  long dep[3]; /* RAW, WAR, WAW seen at this address (dropped with it when sampling evicts it) */
} stp_cell_t;

static stp_site_t stp_sites[STP_MAX_SITES];
static long stp_iter = 0, stp_observed = 0;
static int stp_on = 1;
static stp_cell_t *stp_table = 0;
static long stp_cap = 0, stp_used = 0;
static uint64_t stp_threshold = UINT64_MAX, stp_rng = 0x9E3779B97F4A7C15ull;
static long stp_dep[3], stp_min_dist = -1, stp_dropped = 0;
static int stp_exhaustive = 0;

static inline uint64_t stp_hash(uintptr_t x) {
  uint64_t z = (uint64_t)x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline uint64_t stp_next_random(void) {
  stp_rng ^= stp_rng << 13; stp_rng ^= stp_rng >> 7; stp_rng ^= stp_rng << 17;
  return stp_rng;
}

static void stp_reset(void) {
  memset(stp_sites, 0, sizeof(stp_sites));
  stp_iter = 0; stp_observed = 0; stp_on = 1; stp_used = 0; stp_threshold = UINT64_MAX; stp_min_dist = -1; stp_dropped = 0;
  stp_dep[0] = stp_dep[1] = stp_dep[2] = 0;
  if (stp_table && stp_cap != STP_SHADOW * 2) { free(stp_table); stp_table = 0; }
  if (!stp_table) { stp_cap = STP_SHADOW * 2; stp_table = (stp_cell_t *)calloc(stp_cap, sizeof(stp_cell_t)); }
  else memset(stp_table, 0, stp_cap * sizeof(stp_cell_t));
}

static stp_cell_t *stp_slot(stp_cell_t *table, long cap, uintptr_t addr) {
  long i = (long)(stp_hash(addr) & (uint64_t)(cap - 1));
  while (table[i].addr && table[i].addr != addr) i = (i + 1) & (cap - 1);
  return &table[i];
}

static void stp_rehash(long new_cap, uint64_t keep_below) {
  stp_cell_t *old = stp_table; long old_cap = stp_cap;
  stp_table = (stp_cell_t *)calloc(new_cap, sizeof(stp_cell_t)); stp_cap = new_cap; stp_used = 0;
  for (long i = 0; i < old_cap; i++)
    if (old[i].addr && stp_hash(old[i].addr) < keep_below) { *stp_slot(stp_table, stp_cap, old[i].addr) = old[i]; stp_used++; }
    else if (old[i].addr) stp_dropped++;
  free(old);
}

static inline void stp_conflict(stp_cell_t *cell, int type, long other) {
  if (other < 0 || other >= stp_iter) return;
  cell->dep[type]++;
  long d = stp_iter - other;
  if (stp_min_dist < 0 || d < stp_min_dist) stp_min_dist = d;
}
/* latest iteration strictly before the current one among (cur, before) */
#define STP_PRIOR(c) ((c##_cur) < stp_iter ? (c##_cur) : (c##_before))
#define STP_TOUCH(c) do { if (cell->c##_cur != stp_iter) { cell->c##_before = cell->c##_cur; cell->c##_cur = stp_iter; } } while (0)

static void stp_shadow(int kind, uintptr_t addr) {
  if (stp_hash(addr) >= stp_threshold) return;
  stp_cell_t *cell = stp_slot(stp_table, stp_cap, addr);
  if (!cell->addr) {
    cell->addr = addr; cell->dep[0] = cell->dep[1] = cell->dep[2] = 0; cell->r_cur = cell->r_before = cell->w_cur = cell->w_before = cell->u_cur = cell->u_before = -1;
    if (++stp_used * 2 > stp_cap) {
      if (stp_exhaustive) {
        stp_rehash(stp_cap * 2, UINT64_MAX);
      } else {
        stp_threshold >>= 1; /* adaptive sampling: keep the addresses whose hash is below the new threshold */
        stp_rehash(stp_cap, stp_threshold);
      }
      cell = stp_slot(stp_table, stp_cap, addr);
      if (!cell->addr) return; /* the address itself fell out of the sample */
    }
  }
  long w = cell->w_cur < stp_iter ? cell->w_cur : cell->w_before;
  long r = cell->r_cur < stp_iter ? cell->r_cur : cell->r_before;
  long u = cell->u_cur < stp_iter ? cell->u_cur : cell->u_before;
  if (kind == STP_READ || kind == STP_RW) { stp_conflict(cell, 0, w); stp_conflict(cell, 0, u); }
  if (kind == STP_WRITE || kind == STP_RW) { stp_conflict(cell, 1, r); stp_conflict(cell, 2, w); stp_conflict(cell, 2, u); }
  if (kind == STP_UPDATE) { stp_conflict(cell, 1, r); stp_conflict(cell, 2, w); }
  if (kind == STP_READ || kind == STP_RW) STP_TOUCH(r);
  if (kind == STP_WRITE || kind == STP_RW) STP_TOUCH(w);
  if (kind == STP_UPDATE) STP_TOUCH(u);
}

static void stp_record(int site, int kind, uintptr_t addr, long elem) {
  stp_site_t *s = &stp_sites[site];
  s->count++; s->kinds[kind]++; s->elem = elem;
  if (s->seen && s->prev_gap != stp_iter - stp_observed) { s->have_stride = 0; s->seen = 0; } /* a gap between bursts */
  if (s->seen) {
    long stride = ((long)addr - (long)s->prev) / (elem ? elem : 1);
    int bucket = stride == 0 ? 0 : stride == 1 ? 1 : stride == -1 ? 2 : (!s->have_stride || stride == s->prev_stride) ? 3 : 4;
    s->hist[bucket]++;
    s->prev_stride = stride; s->have_stride = 1;
    if (addr < s->lo) s->lo = addr;
    if (addr > s->hi) s->hi = addr;
  } else {
    if (!s->count_seen) { s->lo = s->hi = addr; s->count_seen = 1; }
    if (addr < s->lo) s->lo = addr;
    if (addr > s->hi) s->hi = addr;
    s->seen = 1;
  }
  s->prev = addr; s->prev_gap = stp_iter - stp_observed;
  if (s->res_n < STP_RESERVOIR) s->res[s->res_n] = (long)addr;
  else { long j = (long)(stp_next_random() % (uint64_t)(s->res_n + 1)); if (j < STP_RESERVOIR) s->res[j] = (long)addr; }
  s->res_n++;
  stp_shadow(kind, addr);
}

/* One JSON line per run: loop id, trips, sampling rate, dependences, per-site statistics. */
static void stp_dump(FILE *out, const char *loop_id, int n_sites) {
  double rate = (double)stp_threshold / 18446744073709551615.0;
  stp_dep[0] = stp_dep[1] = stp_dep[2] = 0; /* counts of the addresses still in the sample */
  for (long i = 0; i < stp_cap; i++)
    if (stp_table[i].addr) { stp_dep[0] += stp_table[i].dep[0]; stp_dep[1] += stp_table[i].dep[1]; stp_dep[2] += stp_table[i].dep[2]; }
  fprintf(out, "{\"loop\":\"%s\",\"observed\":%ld,\"trips\":%ld,\"rate\":%.9g,\"raw\":%ld,\"war\":%ld,\"waw\":%ld,\"min_dist\":%ld,\"sites\":[",
          loop_id, stp_observed, stp_iter, rate, stp_dep[0], stp_dep[1], stp_dep[2], stp_min_dist);
  for (int i = 0; i < n_sites; i++) {
    stp_site_t *s = &stp_sites[i];
    long m = s->res_n < STP_RESERVOIR ? s->res_n : STP_RESERVOIR, distinct = 0;
    for (long a = 0; a < m; a++) { int dup = 0; for (long b = 0; b < a; b++) if (s->res[a] == s->res[b]) { dup = 1; break; } distinct += !dup; }
    fprintf(out, "%s{\"count\":%ld,\"kinds\":[%ld,%ld,%ld,%ld],\"hist\":[%ld,%ld,%ld,%ld,%ld],\"span\":%ld,\"elem\":%ld,\"sample\":%ld,\"distinct\":%ld}",
            i ? "," : "", s->count, s->kinds[0], s->kinds[1], s->kinds[2], s->kinds[3], s->hist[0], s->hist[1], s->hist[2], s->hist[3], s->hist[4],
            s->elem ? (long)((s->hi - s->lo) / s->elem) : 0L, s->elem, m, distinct);
  }
  fprintf(out, "]}\n");
}
#endif

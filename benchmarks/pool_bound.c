/* The bound of the suite's max pool (3x3, stride 2, no padding, NHWC 1x112x112x64 ->
   1x55x55x64, float32) on this machine: hand-written kernels, 2 OpenMP threads, timed
   interleaved in rounds (best of 5 repeats of 100 calls per round). Not a test.

     cc -O3 -march=native -fopenmp -fno-math-errno -o /tmp/pool_bound benchmarks/pool_bound.c
     GOMP_SPINCOUNT=10000 chrt -f 5 /tmp/pool_bound 10     # as on a quiet machine
     OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=0 chrt -f 5 /tmp/pool_bound 10   # the runner's
                                                            # policy on a busy machine
   HUGE=1 allocates the arrays on 2 MiB pages. "naive" is TVM's schedule (rows in
   parallel, the 3x3 window unrolled over a 16-lane channel vector); "rows2" the
   WindowTiling sketch with two output rows; "T RxP" register tiles of R rows by P
   pixels; "separable" a horizontal 3-max per input row kept in registers along the row,
   then the vertical 3-max. The floors read the input (and write the output) once,
   sequentially. Results: docs/benchmarks.md, "pool: the bound". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include <immintrin.h>
#include <sys/mman.h>
#define H 112
#define W 112
#define C 64
#define OH 55
#define OW 55
#define RS (W * C)   /* input row stride, floats */
#define ORS (OW * C) /* output row stride */
typedef __m512 v;
static inline v ld(const float* p) { return _mm512_loadu_ps(p); }
static inline void st(float* p, v x) { _mm512_storeu_ps(p, x); }
static inline void stnt(float* p, v x) { _mm512_stream_ps(p, x); }
static inline v mx(v a, v b) { return _mm512_max_ps(a, b); }
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static float sink[64];

/* read floor: every input vector of rows 0..110, cols 0..110 read once, max-reduced */
static void ro(const float* restrict A, float* restrict O) {
  #pragma omp parallel num_threads(2)
  {
    v a0 = _mm512_set1_ps(-1e30f), a1 = a0, a2 = a0, a3 = a0;
    #pragma omp for schedule(static)
    for (int r = 0; r < 111; ++r)
      for (int i = 0; i < 111 * C; i += 64) {
        const float* p = A + r * RS + i;
        a0 = mx(a0, ld(p)); a1 = mx(a1, ld(p + 16)); a2 = mx(a2, ld(p + 32)); a3 = mx(a3, ld(p + 48));
      }
    v a = mx(mx(a0, a1), mx(a2, a3));
    O[omp_get_thread_num()] = _mm512_reduce_max_ps(a);
  }
}
/* read + write floor: each output vector is the max of 4 consecutive input vectors of a row
   pair (the same bytes in and out as the pool, sequential) */
#define RW_BODY(STORE)                                                                 \
  _Pragma("omp parallel for num_threads(2) schedule(static)")                          \
  for (int y = 0; y < OH; ++y)                                                         \
    for (int x = 0; x < OW; ++x)                                                       \
      for (int c = 0; c < C; c += 16) {                                                \
        const float* p = A + (2 * y) * RS + (2 * x) * C + c;                           \
        STORE(O + y * ORS + x * C + c, mx(mx(ld(p), ld(p + C)), mx(ld(p + RS), ld(p + RS + C)))); \
      }
static void rw(const float* restrict A, float* restrict O) { RW_BODY(st) }
static void rw_nt(const float* restrict A, float* restrict O) { RW_BODY(stnt) _mm_sfence(); }

/* TVM's schedule: rows parallel, 9 loads per output vector */
static void naive(const float* restrict A, float* restrict O) {
  #pragma omp parallel for num_threads(2) schedule(static)
  for (int y = 0; y < OH; ++y)
    for (int x = 0; x < OW; ++x)
      for (int c = 0; c < C; c += 16) {
        const float* p = A + 2 * y * RS + 2 * x * C + c;
        v a = ld(p);
        for (int ry = 0; ry < 3; ++ry)
          for (int rx = 0; rx < 3; ++rx) a = mx(a, ld(p + ry * RS + rx * C));
        st(O + y * ORS + x * C + c, a);
      }
}

/* ours (WindowTiling t=2): two output rows, 15 loads per 2 output vectors */
static void rows2(const float* restrict A, float* restrict O) {
  #pragma omp parallel for num_threads(2) schedule(static)
  for (int yt = 0; yt < 28; ++yt)
    for (int x = 0; x < OW; ++x)
      for (int c = 0; c < C; c += 16) {
        int y = 2 * yt;
        const float* p = A + 2 * y * RS + 2 * x * C + c;
        v h[5];
        for (int r = 0; r < 5; ++r) {
          if (2 * y + r >= 111) { h[r] = h[r - 1]; continue; }
          h[r] = mx(mx(ld(p + r * RS), ld(p + r * RS + C)), ld(p + r * RS + 2 * C));
        }
        st(O + y * ORS + x * C + c, mx(mx(h[0], h[1]), h[2]));
        if (y + 1 < OH) st(O + (y + 1) * ORS + x * C + c, mx(mx(h[2], h[3]), h[4]));
      }
}

/* separable, rolling along x: per output row tile of T rows (2T+1 input rows), the
   horizontal 3-max reuses column 2x+2 as the next pixel's column 2x: 2 loads per input
   row per output pixel; all 4 channel vectors of a pixel inside */
#define SEP(NAME, T, STORE, PF)                                                           \
static void NAME(const float* restrict A, float* restrict O) {                           \
  _Pragma("omp parallel for num_threads(2) schedule(static)")                            \
  for (int yt = 0; yt < (OH + T - 1) / T; ++yt) {                                        \
    int y0 = yt * T, ny = OH - y0 < T ? OH - y0 : T, nr = 2 * ny + 1;                    \
    for (int c = 0; c < C; c += 32) {                                                    \
      v prev[2 * T + 1][2];                                                              \
      for (int r = 0; r < nr; ++r)                                                       \
        for (int k = 0; k < 2; ++k) prev[r][k] = ld(A + (2 * y0 + r) * RS + c + 16 * k); \
      for (int x = 0; x < OW; ++x) {                                                     \
        v hm[2 * T + 1][2];                                                              \
        for (int r = 0; r < nr; ++r) {                                                   \
          const float* p = A + (2 * y0 + r) * RS + (2 * x + 1) * C + c;                  \
          if (PF) _mm_prefetch((const char*)(p + 8 * C), _MM_HINT_T0);                   \
          for (int k = 0; k < 2; ++k) {                                                  \
            v b = ld(p + 16 * k), d = ld(p + C + 16 * k);                                \
            hm[r][k] = mx(mx(prev[r][k], b), d);                                         \
            prev[r][k] = d;                                                              \
          }                                                                              \
        }                                                                                \
        for (int j = 0; j < ny; ++j)                                                     \
          for (int k = 0; k < 2; ++k)                                                    \
            STORE(O + (y0 + j) * ORS + x * C + c + 16 * k,                               \
                  mx(mx(hm[2 * j][k], hm[2 * j + 1][k]), hm[2 * j + 2][k]));             \
      }                                                                                  \
    }                                                                                    \
  }                                                                                      \
}
SEP(sep1, 1, st, 0)
SEP(sep2, 2, st, 0)
SEP(sep4, 4, st, 0)
SEP(sep2nt, 2, stnt, 0)
SEP(sep2pf, 2, st, 1)

/* register tile of 2 rows x 2 pixels, no rolling: 25 loads per 4 output vectors */
static void tile22(const float* restrict A, float* restrict O) {
  #pragma omp parallel for num_threads(2) schedule(static)
  for (int yt = 0; yt < 28; ++yt)
    for (int xt = 0; xt < 28; ++xt)
      for (int c = 0; c < C; c += 16) {
        int y = 2 * yt, x = 2 * xt;
        const float* p = A + 2 * y * RS + 2 * x * C + c;
        int nr = (2 * y + 5 <= 111) ? 5 : 3, nc = (2 * x + 5 <= 111) ? 5 : 3;
        v in[5][5];
        for (int r = 0; r < nr; ++r) for (int q = 0; q < nc; ++q) in[r][q] = ld(p + r * RS + q * C);
        for (int j = 0; j < (nr - 1) / 2; ++j)
          for (int i = 0; i < (nc - 1) / 2; ++i) {
            v a = in[2 * j][2 * i];
            for (int ry = 0; ry < 3; ++ry) for (int rx = 0; rx < 3; ++rx) a = mx(a, in[2 * j + ry][2 * i + rx]);
            st(O + (y + j) * ORS + (x + i) * C + c, a);
          }
      }
}

/* register tile of TY rows x TX pixels (one channel vector), each input vector loaded once
   per tile; interior tiles only (the border tiles go through the generic path) */
#define TILE(NAME, TY, TX)                                                                 \
static void NAME(const float* restrict A, float* restrict O) {                            \
  _Pragma("omp parallel for num_threads(2) schedule(static)")                             \
  for (int yt = 0; yt < (OH + TY - 1) / TY; ++yt)                                         \
    for (int xt = 0; xt < (OW + TX - 1) / TX; ++xt)                                       \
      for (int c = 0; c < C; c += 16) {                                                   \
        int y = TY * yt, x = TX * xt;                                                     \
        const float* p = A + 2 * y * RS + 2 * x * C + c;                                  \
        if (y + TY <= OH && x + TX <= OW) {                                               \
          v in[2 * TY + 1][2 * TX + 1];                                                   \
          _Pragma("GCC unroll 16") for (int r = 0; r < 2 * TY + 1; ++r)                                            \
            _Pragma("GCC unroll 16") for (int q = 0; q < 2 * TX + 1; ++q) in[r][q] = ld(p + r * RS + q * C);       \
          _Pragma("GCC unroll 16") for (int j = 0; j < TY; ++j)                                                  \
            _Pragma("GCC unroll 16") for (int i = 0; i < TX; ++i) {                                              \
              v a = in[2 * j][2 * i];                                                     \
              for (int ry = 0; ry < 3; ++ry)                                              \
                for (int rx = 0; rx < 3; ++rx) a = mx(a, in[2 * j + ry][2 * i + rx]);    \
              st(O + (y + j) * ORS + (x + i) * C + c, a);                                 \
            }                                                                             \
        } else {                                                                          \
          for (int j = 0; j < TY && y + j < OH; ++j)                                      \
            for (int i = 0; i < TX && x + i < OW; ++i) {                                  \
              const float* q = p + 2 * j * RS + 2 * i * C;                                \
              v a = ld(q);                                                                \
              for (int ry = 0; ry < 3; ++ry)                                              \
                for (int rx = 0; rx < 3; ++rx) a = mx(a, ld(q + ry * RS + rx * C));      \
              st(O + (y + j) * ORS + (x + i) * C + c, a);                                 \
            }                                                                             \
        }                                                                                 \
      }                                                                                   \
}
TILE(t12, 1, 2)
TILE(t21, 2, 1)
TILE(t22, 2, 2)
TILE(t24, 2, 4)
TILE(t42, 4, 2)
TILE(t44, 4, 4)
TILE(t15, 1, 5)
TILE(t55, 5, 5)

/* rows2 with a software prefetch of the next row tile (its 4 new rows), a few pixels ahead */
static void rows2pf(const float* restrict A, float* restrict O) {
  #pragma omp parallel for num_threads(2) schedule(static)
  for (int yt = 0; yt < 28; ++yt)
    for (int x = 0; x < OW; ++x) {
      int y = 2 * yt;
      if (yt + 1 < 28)
        for (int r = 1; r < 5; ++r) {
          const char* q = (const char*)(A + (2 * y + 4 + r) * RS + 2 * x * C);
          if (2 * y + 4 + r < 111) { _mm_prefetch(q, _MM_HINT_T1); _mm_prefetch(q + 64, _MM_HINT_T1); _mm_prefetch(q + 128, _MM_HINT_T1); _mm_prefetch(q + 192, _MM_HINT_T1);
            _mm_prefetch(q + 256, _MM_HINT_T1); _mm_prefetch(q + 320, _MM_HINT_T1); _mm_prefetch(q + 384, _MM_HINT_T1); _mm_prefetch(q + 448, _MM_HINT_T1); }
        }
      for (int c = 0; c < C; c += 16) {
        const float* p = A + 2 * y * RS + 2 * x * C + c;
        v h[5];
        for (int r = 0; r < 5; ++r) {
          if (2 * y + r >= 111) { h[r] = h[r - 1]; continue; }
          h[r] = mx(mx(ld(p + r * RS), ld(p + r * RS + C)), ld(p + r * RS + 2 * C));
        }
        st(O + y * ORS + x * C + c, mx(mx(h[0], h[1]), h[2]));
        if (y + 1 < OH) st(O + (y + 1) * ORS + x * C + c, mx(mx(h[2], h[3]), h[4]));
      }
    }
}
/* rows2, channel vectors outermost inside the row tile */
static void rows2c(const float* restrict A, float* restrict O) {
  #pragma omp parallel for num_threads(2) schedule(static)
  for (int yt = 0; yt < 28; ++yt)
    for (int c = 0; c < C; c += 16)
      for (int x = 0; x < OW; ++x) {
        int y = 2 * yt;
        const float* p = A + 2 * y * RS + 2 * x * C + c;
        v h[5];
        for (int r = 0; r < 5; ++r) {
          if (2 * y + r >= 111) { h[r] = h[r - 1]; continue; }
          h[r] = mx(mx(ld(p + r * RS), ld(p + r * RS + C)), ld(p + r * RS + 2 * C));
        }
        st(O + y * ORS + x * C + c, mx(mx(h[0], h[1]), h[2]));
        if (y + 1 < OH) st(O + (y + 1) * ORS + x * C + c, mx(mx(h[2], h[3]), h[4]));
      }
}
static void rows2_1t(const float* restrict A, float* restrict O) {
  for (int yt = 0; yt < 28; ++yt)
    for (int x = 0; x < OW; ++x)
      for (int c = 0; c < C; c += 16) {
        int y = 2 * yt;
        const float* p = A + 2 * y * RS + 2 * x * C + c;
        v h[5];
        for (int r = 0; r < 5; ++r) {
          if (2 * y + r >= 111) { h[r] = h[r - 1]; continue; }
          h[r] = mx(mx(ld(p + r * RS), ld(p + r * RS + C)), ld(p + r * RS + 2 * C));
        }
        st(O + y * ORS + x * C + c, mx(mx(h[0], h[1]), h[2]));
        if (y + 1 < OH) st(O + (y + 1) * ORS + x * C + c, mx(mx(h[2], h[3]), h[4]));
      }
}
static void rw_1t(const float* restrict A, float* restrict O) {
  for (int y = 0; y < OH; ++y)
    for (int x = 0; x < OW; ++x)
      for (int c = 0; c < C; c += 16) {
        const float* p = A + (2 * y) * RS + (2 * x) * C + c;
        st(O + y * ORS + x * C + c, mx(mx(ld(p), ld(p + C)), mx(ld(p + RS), ld(p + RS + C))));
      }
}
/* an empty parallel region: the fork/join cost alone */
static void empty(const float* restrict A, float* restrict O) {
  #pragma omp parallel num_threads(2)
  { if (omp_get_thread_num() == 5) O[0] = A[0]; }
}
TILE(t41, 4, 1)

typedef void (*kern)(const float* restrict, float* restrict);
int main(int argc, char** argv) {
  int huge = getenv("HUGE") != NULL;
  size_t na = ((size_t)H * W * C * 4 + (2 << 20) - 1) & ~(size_t)((2 << 20) - 1);
  size_t no = ((size_t)OH * OW * C * 4 + (2 << 20) - 1) & ~(size_t)((2 << 20) - 1);
  float* A = huge ? aligned_alloc(2 << 20, na) : aligned_alloc(64, (size_t)H * W * C * 4);
  float* O = huge ? aligned_alloc(2 << 20, no) : aligned_alloc(64, (size_t)OH * OW * C * 4);
  if (huge) { madvise(A, na, MADV_HUGEPAGE); madvise(O, no, MADV_HUGEPAGE); }
  float* R = aligned_alloc(64, (size_t)OH * OW * C * 4);
  srand(1);
  for (int i = 0; i < H * W * C; ++i) A[i] = rand() / (float)RAND_MAX - 0.5f;
  naive(A, R);
  kern ks[] = {ro, rw, rw_nt, naive, rows2, sep1, sep2, sep4, sep2nt, sep2pf, tile22, t12, t21, t22, t24, t42, t44, t15, t55, rows2pf, rows2c, rows2_1t, rw_1t, empty, t41};
  const char* nm[] = {"read floor (3.15 MB)", "read+write floor", "read+write floor, NT stores",
                      "naive (TVM's, 9 loads)", "rows2 (ours, 7.5 loads)", "separable 1 row (rolling)",
                      "separable 2 rows (rolling)", "separable 4 rows (rolling)", "sep2 + NT stores",
                      "sep2 + prefetch", "tile 2x2 (6.25 loads)", "T 1x2", "T 2x1", "T 2x2", "T 2x4", "T 4x2", "T 4x4", "T 1x5", "T 5x5", "rows2 + prefetch next tile", "rows2, channels outer", "rows2, 1 thread", "read+write floor, 1 thread", "empty parallel region", "T 4x1"};
  int nk = sizeof(ks) / sizeof(ks[0]);
  int check[] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1};
  double best[32];
  for (int k = 0; k < nk; ++k) best[k] = 1e9;
  int rounds = argc > 1 ? atoi(argv[1]) : 10;
  for (int round = 0; round < rounds; ++round)
    for (int k = 0; k < nk; ++k) {
      memset(O, 0, (size_t)OH * OW * C * 4);
      ks[k](A, O);
      if (check[k] && memcmp(O, R, (size_t)OH * OW * C * 4)) printf("MISMATCH %s\n", nm[k]);
      for (int r = 0; r < 5; ++r) {
        double t0 = now();
        for (int i = 0; i < 100; ++i) ks[k](A, O);
        double t = (now() - t0) / 100;
        if (t < best[k]) best[k] = t;
      }
    }
  for (int k = 0; k < nk; ++k)
    printf("%-32s %7.2f us  %6.1f GFLOPS-eq  %.2fx naive\n", nm[k], best[k] * 1e6, 1742400 / best[k] / 1e9, best[3] / best[k]);
  (void)sink;
  return 0;
}

/* The memory bound of the suite's depthwise conv2d (`dep`: 1x112x112x32 float32 in and
   out, 1.6 MB each) on this machine: 2 OpenMP threads stream the input once (read), or
   read it and write the output once (copy; a scaled copy), as a kernel of `dep` must at
   least. Best of 200 rounds of 20 calls. Not a test. Results: docs/benchmarks.md.

     cc -O3 -march=native -fopenmp -o /tmp/dep_bound benchmarks/dep_bound.c
     GOMP_SPINCOUNT=10000 chrt -f 5 /tmp/dep_bound
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <immintrin.h>
#define N (112 * 112 * 32)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

int main(void) {
  float *a, *b;
  if (posix_memalign((void**)&a, 64, N * 4) || posix_memalign((void**)&b, 64, N * 4)) return 1;
  for (int i = 0; i < N; i++) { a[i] = i % 13; b[i] = 0; }
  float sink = 0;
  const char* names[] = {"read", "read + write", "read + scale + write"};
  for (int mode = 0; mode < 3; mode++) {
    double best = 1e9;
    for (int r = 0; r < 200; r++) {
      double t = now();
      for (int it = 0; it < 20; it++) {
        if (mode == 0) {
          #pragma omp parallel for num_threads(2) schedule(static) reduction(+ : sink)
          for (int i = 0; i < N; i += 32)
            sink += _mm512_reduce_max_ps(_mm512_max_ps(_mm512_load_ps(a + i), _mm512_load_ps(a + i + 16))) * 0;
        } else if (mode == 1) {
          #pragma omp parallel for num_threads(2) schedule(static)
          for (int i = 0; i < N; i += 16) _mm512_store_ps(b + i, _mm512_load_ps(a + i));
        } else {
          #pragma omp parallel for num_threads(2) schedule(static)
          for (int i = 0; i < N; i += 16)
            _mm512_store_ps(b + i, _mm512_mul_ps(_mm512_load_ps(a + i), _mm512_set1_ps(2.f)));
        }
      }
      double dt = (now() - t) / 20;
      if (dt < best) best = dt;
    }
    printf("%-22s %.1f us\n", names[mode], best * 1e6);
  }
  printf("(sink %g)\n", sink);
  return 0;
}

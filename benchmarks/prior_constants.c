/* The machine constants of the analytic prior (metaschedule/cost_model/prior.py, class
   Machine), measured on this machine: not a test.

     cc -O3 -march=native -fopenmp -o /tmp/prior_constants benchmarks/prior_constants.c
     GOMP_SPINCOUNT=10000 /tmp/prior_constants           # the runner on a quiet machine
     OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=0 /tmp/prior_constants   # ... on a busy one

   Cycles are core cycles: the clock is measured first with a chain of dependent integer
   adds (one a cycle). Times are the thread's CPU time (other processes' slices do not
   count; the caches they share do), but for fork/join (wall time). Per core, one thread (the prior divides by the parallel speed-up):
   * "fma": 12 independent 16-lane FMA chains: FMAs a cycle (fma_ports at 16 lanes);
   * "fma+load": the same with one operand loaded from L1 per FMA, then two: loads a
     cycle where they, not the FMAs, bound (loads_per_cycle);
   * "fma chain": cycles per FMA of one dependent chain (fma_latency), and of a chain
     whose value is stored and loaded back between FMAs (memory_round_trip on top);
   * "stores": 16-lane stores a cycle into L1 (stores_per_cycle);
   * "read L1/L2/L3/DRAM": the sum of a buffer of 16 KiB, 512 KiB, 8 MiB, 256 MiB read
     again and again with 16-lane loads into 8 accumulators: bytes a cycle from each
     level (l2_bytes_per_cycle, l3_bytes_per_cycle); also with both cores reading;
   * "fork/join": an empty `omp parallel for num_threads(2)` over 2 iterations entered
     back to back, and one doing 2 x 2 us of work (less the work): cycles per region
     entry (fork_join_cycles).
   Results on the project's Zen 5: the comments of Machine's fields. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* the thread's CPU time: other processes' time slices do not count */
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double wall(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double ghz(void) {
  long x = 0, n = 400000000;
  double best = 1e9;
  for (int r = 0; r < 3; ++r) {
    double t0 = now();
    for (long i = 0; i < n; i += 8) {
      __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                       "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                       : "+r"(x));
    }
    double t = now() - t0;
    if (t < best) best = t;
  }
  return n / best / 1e9;
}

volatile float sink;

/* FMAs a cycle with `loads` operands (0, 1, 2) of each FMA loaded from an L1 buffer */
static double fma_rate(int loads, double hz) {
  static float buf[4096 + 512] __attribute__((aligned(64)));
  for (int i = 0; i < 4096 + 512; ++i) buf[i] = 1e-6f * i;
  __m512 a[12], x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps((float)i);
  long iters = 20000000;
  double t0 = now();
  for (long n = 0; n < iters; ++n) {
    const float* p = buf + (n & 15) * 256;
    for (int i = 0; i < 12; ++i) {
      __m512 m = loads >= 1 ? _mm512_load_ps(p + 16 * i) : x;
      __m512 c = loads >= 2 ? _mm512_load_ps(p + 16 * (i + 12)) : y;
      a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    __asm__ volatile("" ::: "memory");
  }
  double t = now() - t0;
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  sink = _mm512_reduce_add_ps(s);
  return iters * 12.0 / (t * hz);
}

/* cycles per FMA of one dependent chain (fma_latency); with `memory`, the chain's value
   goes through memory between FMAs (store-to-load forwarding: memory_round_trip on top) */
static double fma_chain(int memory, double hz) {
  static __m512 slot;
  __m512 a = _mm512_set1_ps(1.0f), x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
  long iters = 50000000;
  slot = a;
  double t0 = now();
  for (long n = 0; n < iters; ++n) {
    if (memory) {
      __m512 v = _mm512_load_ps((const float*)&slot);
      __asm__ volatile("" : "+v"(v));
      _mm512_store_ps((float*)&slot, _mm512_fmadd_ps(v, x, y));
      __asm__ volatile("" ::: "memory");
    } else {
      a = _mm512_fmadd_ps(a, x, y);
      __asm__ volatile("" : "+v"(a));
    }
  }
  double t = now() - t0;
  sink = _mm512_reduce_add_ps(a) + _mm512_reduce_add_ps(slot);
  return t * hz / iters;
}

/* 16-lane stores a cycle into an L1 buffer (stores_per_cycle) */
static double store_rate(double hz) {
  static float buf[4096] __attribute__((aligned(64)));
  __m512 v = _mm512_set1_ps(1.0f);
  long iters = 2000000;
  double t0 = now();
  for (long n = 0; n < iters; ++n) {
    for (int i = 0; i < 4096; i += 16) _mm512_store_ps(buf + i, v);
    __asm__ volatile("" ::: "memory");
  }
  double t = now() - t0;
  sink = buf[(iters * 7) & 4095];
  return iters * 256.0 / (t * hz);
}

/* bytes a cycle reading `bytes` again and again, per thread, `threads` threads */
static double read_rate(size_t bytes, int threads, double hz) {
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    float* buf = aligned_alloc(64, bytes);
    size_t n = bytes / 4;
    for (size_t i = 0; i < n; ++i) buf[i] = 1e-9f * (i & 1023);
    long reps = (long)(4e9 / bytes) + 1;
    __m512 acc[8];
    for (int k = 0; k < 8; ++k) acc[k] = _mm512_setzero_ps();
    double best = 1e9;
    for (int r = 0; r < 3; ++r) {
#pragma omp barrier
      double t0 = now();
      for (long rep = 0; rep < reps / 3 + 1; ++rep)
        for (size_t i = 0; i < n; i += 128)
          for (int k = 0; k < 8; ++k)
            acc[k] = _mm512_add_ps(acc[k], _mm512_load_ps(buf + i + 16 * k));
      double t = (now() - t0) / (reps / 3 + 1);
      if (t < best) best = t;
    }
    __m512 s = acc[0];
    for (int k = 1; k < 8; ++k) s = _mm512_add_ps(s, acc[k]);
    sink = _mm512_reduce_add_ps(s);
    total += bytes / (best * hz);
    free(buf);
  }
  return total / threads;
}

static void spin_us(double us) {
  double t0 = wall();
  while (wall() - t0 < us * 1e-6) {
  }
}

/* cycles per entry into a parallel region of 2 iterations of `us` microseconds each */
static double fork_join(double us, double hz) {
  int n = us > 0 ? 20000 : 200000;
  double best = 1e9;
  for (int r = 0; r < 5; ++r) {
    double t0 = wall();
    for (int k = 0; k < n; ++k) {
#pragma omp parallel for num_threads(2)
      for (int i = 0; i < 2; ++i) {
        if (us > 0) spin_us(us);
        else __asm__ volatile("" ::: "memory");
      }
    }
    double t = (wall() - t0) / n - us * 1e-6;
    if (t < best) best = t;
  }
  return best * hz;
}

int main(void) {
  double hz = ghz() * 1e9;
  printf("clock: %.2f GHz (dependent integer adds)\n", hz / 1e9);
  for (int loads = 0; loads <= 2; ++loads) {
    double rate = fma_rate(loads, hz);
    printf("fma, %d operand(s) loaded from L1: %.2f 16-lane FMAs a cycle (%.2f loads)\n",
           loads, rate, loads * rate);
  }
  printf("fma chain: %.2f cycles an FMA; through memory: %.2f cycles\n", fma_chain(0, hz),
         fma_chain(1, hz));
  printf("stores: %.2f 16-lane stores a cycle into L1\n", store_rate(hz));
  size_t sizes[] = {16 << 10, 512 << 10, 8 << 20, 256 << 20};
  const char* names[] = {"L1", "L2", "L3", "DRAM"};
  for (int s = 0; s < 4; ++s)
    printf("read %-4s (%6zu KiB): %5.1f bytes a cycle, 1 thread; %5.1f per thread, 2 threads\n",
           names[s], sizes[s] >> 10, read_rate(sizes[s], 1, hz), read_rate(sizes[s], 2, hz));
  printf("fork/join, empty region: %.0f cycles\n", fork_join(0, hz));
  printf("fork/join, 2 x 2 us of work: %.0f cycles over the work\n", fork_join(2, hz));
  printf("fork/join, 2 x 20 us of work: %.0f cycles over the work\n", fork_join(20, hz));
  return 0;
}

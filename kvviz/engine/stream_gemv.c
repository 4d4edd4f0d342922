/* A matrix-vector product that streams its weight at the memory's speed: y = W x (+ b), W [rows, cols] row-major.
 *
 * kvviz.engine.stream builds this file with the machine's C compiler (-O3 -march=native -fopenmp) and calls it
 * through ctypes; see that module for why it exists and what it measured. Each thread takes a contiguous band of
 * rows and walks it one row after the next, so its part of the weight is one sequential stream, read once, which
 * the hardware prefetcher follows; x (a few KB) stays in L1. Several accumulators a row hide the latency of the
 * multiply-adds. Sums are fp32 (as torch's bf16 products accumulate), the bias added in fp32, the output rounded
 * to the weight's dtype once, at the end. No load reads past a row's end: the last row ends the tensor's memory.
 *
 * Two paths, chosen by what the compiler may use (-march=native: what the CPU has):
 * - AVX-512 (Foundation and BW, for the masked 16-bit loads of a row's tail): 512-bit vectors, two accumulators.
 *   bf16 weights: with AVX512-BF16 (vdpbf16ps) x is read as bf16, two products a lane per instruction; without it
 *   weight and x are widened to fp32 (a bf16 is an fp32's upper half) and multiplied in fp32. Every loop
 *   prefetches the row 1 KB ahead (see PREFETCH_BYTES).
 * - AVX2 with FMA: 256-bit vectors, four accumulators. bf16 weights are widened to fp32 by a mask and a shift, 16 at
 *   a time, against x split once per product into fp32 (see bf16_band there). AVX2 has no masked 16-bit load, so
 *   a bf16 row's last cols % 16 values are summed one by one; an fp32 row's by a masked load.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline float bf16_to_f32(uint16_t v) {
    uint32_t bits = (uint32_t)v << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even, as torch rounds (NaN kept a NaN) */
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* A software prefetch this far ahead of the loads, a line at a time (never faults, past the row's end too): it
 * keeps more of the stream in flight than the out-of-order window does. On a 2-core Xeon with AVX-512 BF16 and AMX
 * (2026-12-05, results/amx-xeon/kernel-lab/), the Qwen2.5-0.5B twin's bf16 shapes each read from 400 MB of copies,
 * interleaved with a streaming read in 9 rounds: the vdpbf16ps loop 0.72-0.86 of the read without it, 0.98-1.18 with
 * it (1.27-1.41x; 256 and 2048 bytes ahead: within a few percent; four accumulators instead: no gain); the widened
 * bf16 loop 1.11-1.19x; SmolLM2's fp32 shapes 1.06-1.11x. (The AVX2 path's figures: above its bf16_band.) */
#define PREFETCH_BYTES 1024

#if defined(__AVX512F__) && defined(__AVX512BW__)
#ifdef __AVX512BF16__
#define PATH "avx512-bf16"
#else
#define PATH "avx512"
#endif

/* the lanes of a 16-lane vector that hold the n values left (none past the row's end) */
static inline __mmask16 lanes16(long n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* the widening of 16 bf16 values (32 bytes) to fp32 */
static inline __m512 widen(const uint16_t *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static void bf16_band(const uint16_t *w, const uint16_t *x, const uint16_t *b, uint16_t *y, long r0, long r1,
                      long cols) {
    for (long r = r0; r < r1; r++) {
        const uint16_t *row = w + r * cols;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        long k = 0;
#ifdef __AVX512BF16__
        for (; k + 64 <= cols; k += 64) {
            _mm_prefetch((const char *)(row + k) + PREFETCH_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)(row + k + 32) + PREFETCH_BYTES, _MM_HINT_T0);
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(row + k), (__m512bh)_mm512_loadu_si512(x + k));
            a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(row + k + 32),
                                  (__m512bh)_mm512_loadu_si512(x + k + 32));
        }
        for (; k < cols; k += 32) {
            __mmask32 m = cols - k >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (cols - k)) - 1);
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_maskz_loadu_epi16(m, row + k),
                                  (__m512bh)_mm512_maskz_loadu_epi16(m, x + k));
        }
#else
        for (; k < cols; k += 32) {
            _mm_prefetch((const char *)(row + k) + PREFETCH_BYTES, _MM_HINT_T0);
            __mmask16 m0 = lanes16(cols - k), m1 = lanes16(cols - k - 16);
            a0 = _mm512_fmadd_ps(widen(row + k, m0), widen(x + k, m0), a0);
            a1 = _mm512_fmadd_ps(widen(row + k + 16, m1), widen(x + k + 16, m1), a1);
        }
#endif
        float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
        if (b) s += bf16_to_f32(b[r]);
        y[r] = f32_to_bf16(s);
    }
}

static void f32_band(const float *w, const float *x, const float *b, float *y, long r0, long r1, long cols) {
    for (long r = r0; r < r1; r++) {
        const float *row = w + r * cols;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (long k = 0; k < cols; k += 32) {
            _mm_prefetch((const char *)(row + k) + PREFETCH_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)(row + k + 16) + PREFETCH_BYTES, _MM_HINT_T0);
            __mmask16 m0 = lanes16(cols - k), m1 = lanes16(cols - k - 16);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, row + k), _mm512_maskz_loadu_ps(m0, x + k), a0);
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, row + k + 16), _mm512_maskz_loadu_ps(m1, x + k + 16), a1);
        }
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + (b ? b[r] : 0.0f);
    }
}

#elif defined(__AVX2__) && defined(__FMA__)
#define PATH "avx2"
#define SPLIT_X /* bf16_band reads x split into its even- and odd-indexed values (see there) */

/* the lanes of an 8-lane vector that hold the n values left (none past the row's end): a lane is on where its top
 * bit is set */
static inline __m256i lanes8(long n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n < 8 ? (int)n : 8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* the sum of a vector's 8 lanes */
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* A 256-bit load holds 16 bf16 values: value 2j in the low half of 32-bit lane j, 2j + 1 in its high half. As fp32,
 * the odd ones are the lanes with the low halves cleared (one AND) and the even ones the lanes shifted left by 16
 * (one shift); x, split once per product into its even- and odd-indexed values as fp32 (xe, xo), meets each in
 * the same lanes. Two cheap operations widen 16 weights, where widening each 8 (vpmovzxwd and a shift) and x again
 * for every row took twice the instructions. A software prefetch 1 KB ahead (a line per 32 values) keeps more of
 * the stream in flight than the out-of-order window does at these instructions a byte. On the 2-core Zen 3 EPYC,
 * the Qwen2.5-0.5B twin's bf16 products (a step's worth, one thread or two) interleaved with a streaming read in 9
 * rounds: 0.71-0.76 of the read before, 0.76-0.81 with the split, 0.81-0.84 with the prefetch too (256 to 2048
 * bytes ahead tried: 0.76-0.84); fp32 rows, at 0.90 of the read, gained nothing from a prefetch. */
#define PREFETCH_AHEAD (PREFETCH_BYTES / 2) /* in bf16 values */
static void bf16_band(const uint16_t *w, const uint16_t *x, const float *xe, const float *xo, const uint16_t *b,
                      uint16_t *y, long r0, long r1, long cols) {
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    for (long r = r0; r < r1; r++) {
        const uint16_t *row = w + r * cols;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
               a3 = _mm256_setzero_ps();
        long k = 0;
        for (; k + 32 <= cols; k += 32) {
            _mm_prefetch((const char *)(row + k + PREFETCH_AHEAD), _MM_HINT_T0);  /* never faults, past the end too */
            __m256i v0 = _mm256_loadu_si256((const __m256i *)(row + k));
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(row + k + 16));
            long h = k / 2;
            a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)), _mm256_loadu_ps(xe + h), a0);
            a1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v0, high)), _mm256_loadu_ps(xo + h), a1);
            a2 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)), _mm256_loadu_ps(xe + h + 8), a2);
            a3 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v1, high)), _mm256_loadu_ps(xo + h + 8), a3);
        }
        for (; k + 16 <= cols; k += 16) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(row + k));
            a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_loadu_ps(xe + k / 2), a0);
            a1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, high)), _mm256_loadu_ps(xo + k / 2), a1);
        }
        float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        for (; k < cols; k++) s += bf16_to_f32(row[k]) * bf16_to_f32(x[k]);
        if (b) s += bf16_to_f32(b[r]);
        y[r] = f32_to_bf16(s);
    }
}

static void f32_band(const float *w, const float *x, const float *b, float *y, long r0, long r1, long cols) {
    for (long r = r0; r < r1; r++) {
        const float *row = w + r * cols;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
               a3 = _mm256_setzero_ps();
        long k = 0;
        for (; k + 32 <= cols; k += 32) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k), _mm256_loadu_ps(x + k), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 8), _mm256_loadu_ps(x + k + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 16), _mm256_loadu_ps(x + k + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 24), _mm256_loadu_ps(x + k + 24), a3);
        }
        for (; k < cols; k += 8) {  /* the last 1-31 values, 8 at a time, the last load masked */
            __m256i m = lanes8(cols - k);
            a0 = _mm256_fmadd_ps(_mm256_maskload_ps(row + k, m), _mm256_maskload_ps(x + k, m), a0);
        }
        y[r] = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + (b ? b[r] : 0.0f);
    }
}

#else
#error "kvviz's streaming kernel needs AVX-512 (F and BW) or AVX2 with FMA"
#endif

/* Each of `threads` threads takes an equal band of rows, a multiple of 16 long (a cache line of fp32 outputs, so
 * that no two threads write one line), the last what is left. */
#define BANDS(call)                                                                  \
    _Pragma("omp parallel num_threads(threads)") {                                 \
        int t = omp_get_thread_num(), n = omp_get_num_threads();                     \
        long per = ((rows + n - 1) / n + 15) / 16 * 16;                       \
        long r0 = t * per, r1 = r0 + per < rows ? r0 + per : rows;                   \
        if (r0 < r1) call;                                                           \
    }

int omp_get_thread_num(void);
int omp_get_num_threads(void);

/* Both return 0, or -1 where the memory for x's split (AVX2, bf16: 4 bytes a value) could not be had. */
int kvviz_gemv_bf16(const uint16_t *w, const uint16_t *x, const uint16_t *b, uint16_t *y, long rows, long cols,
                    int threads) {
#ifdef SPLIT_X
    long half = cols / 16 * 8; /* the pairs in whole 16-value blocks; the tail is read from x itself */
    float *xs = malloc((size_t)(half > 0 ? 2 * half : 1) * sizeof(float));
    if (!xs) return -1;
    for (long i = 0; i < half; i++) {
        xs[i] = bf16_to_f32(x[2 * i]);
        xs[half + i] = bf16_to_f32(x[2 * i + 1]);
    }
    BANDS(bf16_band(w, x, xs, xs + half, b, y, r0, r1, cols))
    free(xs);
#else
    BANDS(bf16_band(w, x, b, y, r0, r1, cols))
#endif
    return 0;
}

int kvviz_gemv_f32(const float *w, const float *x, const float *b, float *y, long rows, long cols, int threads) {
    BANDS(f32_band(w, x, b, y, r0, r1, cols))
    return 0;
}

/* which path this build compiled (kvviz.engine.stream.path) */
const char *kvviz_gemv_path(void) { return PATH; }

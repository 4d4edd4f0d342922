/* A matrix-vector product that streams its weight at the memory's speed: y = W x (+ b), W [rows, cols] row-major.
 *
 * kvviz.engine.stream builds this file with the machine's C compiler (-O3 -march=native -fopenmp) and calls it
 * through ctypes; see that module for why it exists and what it measured. Each thread takes a contiguous band of
 * rows and walks it one row after the next, so its part of the weight is one sequential stream, read once, which
 * the hardware prefetcher follows; x (a few KB) stays in L1. Two accumulators a row hide the latency of the
 * multiply-adds. Sums are fp32 (as torch's bf16 products accumulate), the bias added in fp32, the output rounded
 * to the weight's dtype once, at the end.
 *
 * bf16 weights: with AVX512-BF16 (vdpbf16ps) x is read as bf16, two products a lane per instruction; without it
 * weight and x are widened to fp32 (a bf16 is an fp32's upper half) and multiplied in fp32.
 */
#include <immintrin.h>
#include <stdint.h>
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
            __mmask16 m0 = lanes16(cols - k), m1 = lanes16(cols - k - 16);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, row + k), _mm512_maskz_loadu_ps(m0, x + k), a0);
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, row + k + 16), _mm512_maskz_loadu_ps(m1, x + k + 16), a1);
        }
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + (b ? b[r] : 0.0f);
    }
}

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

void kvviz_gemv_bf16(const uint16_t *w, const uint16_t *x, const uint16_t *b, uint16_t *y, long rows, long cols,
                     int threads) {
    BANDS(bf16_band(w, x, b, y, r0, r1, cols))
}

void kvviz_gemv_f32(const float *w, const float *x, const float *b, float *y, long rows, long cols, int threads) {
    BANDS(f32_band(w, x, b, y, r0, r1, cols))
}

/* Fused loops for posenc's memory-bound hot paths, each one pass over its output.
 *
 * rotate     out = R x for rotary pairs (Su et al. 2021, RoFormer, eq. 34):
 *              out_a = x_a·cos_a − x_b·sin_a,   out_b = x_b·cos_b + x_a·sin_b
 *            with pair i = (i, i + r/2) ("half_split") or (2i, 2i + 1) ("adjacent"), cos/sin
 *            [s, r] tables in the pair layout (sines of column a negated), or [s, r/2] ("paired":
 *            one value per pair); columns r … d−1 are copied. float32 and bfloat16 work in float32
 *            (bfloat16 rounded once, to nearest even: by VCVTNEPS2BF16 where the CPU has AVX512-BF16
 *            and the tables are paired with 16 | r/2, else in portable integer code), float64 in float64.
 *            The tables are float32 or float64 as the work, or bfloat16 beside bfloat16 x (widened
 *            exactly as they are read: half the table traffic).
 * rotate_qk  queries q [b, h, s_q, d] and keys k [b, h_k, s_k, d] rotated as `rotate` does (its row functions,
 *            paired tables) in one call, at int64 positions [b or 1, s] or at an offset per side: per (side,
 *            batch, token) the table row is found once (the row t of the cache [n, r/2] for 0 ≤ t < n, else
 *            a·cos(t·θ_i), a·sin(t·θ_i) from float64 angles, rounded once to the tables' dtype; sines negated
 *            for Rᵀ), then the rows of all heads are rotated by it. Positions with |t| ≥ 2^53 are refused
 *            before anything is written (the first one is returned).
 * slots      Shaw et al. (2018) relative positions: gather_slots out[r, j] = table[r, idx[i, j]] reads one of
 *            n slots per (row, key), or adds it to out in place (scores += the key term, one pass);
 *            sum_slots, its adjoint, sums w[r, j] into slot idx[i, j] of row r.
 *            Each index row is first cut into pieces, runs of one slot (a fill, or a sum) and runs of
 *            consecutive slots (a copy): a clipped distance row is three pieces, done at copy speed.
 * expi_rows  rows of the sinusoidal table by the angle addition formula (Vaswani et al. 2017, §3.5):
 *            row q·b + j, pair i, is z = fine[j, i]·coarse[q, i], a float64 complex product, its
 *            (Re z, Im z) rounded once to the output dtype and stored as the layout places them. The
 *            fine [b, f] and coarse [⌈n/b⌉, f] rows are built first from a first row and a unit factor
 *            each, by doubling (rows m … 2m−1 are rows 0 … m−1 times the factor, which is then squared),
 *            real and imaginary parts in separate arrays so that the loads are contiguous.
 *
 * No Python objects cross the boundary: posenc._native's wrappers check shapes, strides, dtypes and
 * that every addressed element lies in its array's storage, then pass data pointers and sizes; the
 * entry points below re-check what they can see (codes, sizes, their relations). The GIL is released
 * while a loop runs. Loops run on the calling thread (benchmarks/README.md says why). Hot loops are
 * compiled for x86-64-v4/v3 and baseline, chosen at load time, where GCC's target_clones is available.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define HAVE_STREAM 1
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#if __GNUC__ >= 10
#include <immintrin.h>
#define HAVE_BF16_HW 1
#endif
#else
#define CLONES
#endif

enum { F32 = 0, F64 = 1, BF16 = 2 };
enum { ADJACENT = 0, HALF_SPLIT = 1 };
enum { INTERLEAVED = 0, SWAPPED = 1, SPLIT = 2 };

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even; NaN stays NaN (quiet) */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Copy n bytes to dst by non-temporal stores that bypass the cache (no read of the destination
 * lines first), for outputs much larger than the cache, as glibc's memcpy does; plain copy elsewhere. */
static void stream_bytes(char *dst, const char *src, size_t n) {
#ifdef HAVE_STREAM
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > n) head = n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 16; dst += 16, src += 16, n -= 16)
        _mm_stream_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)src));
#endif
    memcpy(dst, src, n);
}

static inline void fence_if_streamed(int stream) { /* make streamed stores visible before returning */
#ifdef HAVE_STREAM
    if (stream) _mm_sfence();
#endif
    (void)stream;
}

/* ---- rotate ------------------------------------------------------------------------------ */

typedef struct {
    const char *x;
    char *out;
    const char *cos, *sin;
    int dtype, tdtype, layout; /* tdtype: the tables' dtype code */
    Py_ssize_t n0, n1, s, d, r;
    Py_ssize_t xs0, xs1, xs2, os0, os1, os2, ts; /* strides in elements */
    int paired; /* cos, sin hold one value per pair: [s, r/2] */
} rotate_args;

/* A hint that the cache line at p will be read (write = 0) or written (1) soon; nothing where the
 * compiler has no prefetch builtin. Prefetches never fault, so p may point past the data. */
#if defined(__GNUC__)
#define PREFETCH(p, write) __builtin_prefetch((const void *)(p), (write), 3)
#else
#define PREFETCH(p, write) ((void)(p))
#endif
#define PREFETCH_BYTES 4096 /* how far ahead of the row being worked on its successors are fetched */

/* The offset in bytes of the first row at least PREFETCH_BYTES ahead, for rows `stride` bytes apart. */
static inline Py_ssize_t ahead_bytes(Py_ssize_t stride) {
    const Py_ssize_t size = stride < 0 ? -stride : stride;
    return size == 0 ? 0 : (PREFETCH_BYTES + size - 1) / size * stride;
}

/* Prefetch the `bytes` of the x row `x_step` bytes on (read) and of the out row `o_step` bytes on
 * (write), one hint per 64-byte line. The rows are addressed as integers: they may lie past the end. */
static inline void prefetch_rows(const void *x, Py_ssize_t x_step, void *o, Py_ssize_t o_step, size_t bytes) {
    const uintptr_t px = (uintptr_t)x + (uintptr_t)x_step, po = (uintptr_t)o + (uintptr_t)o_step;
    for (size_t k = 0; k < bytes; k += 64) {
        PREFETCH(px + k, 0);
        PREFETCH(po + k, 1);
    }
}

/* Every row (i0, i1, t) of `a`, a local copy of the arguments (passed by value: the tail memcpy cannot
 * alias it, so its fields stay in registers and the branches on them leave the loop): the body
 * (the variadic part) runs with x, o (T *) and the table rows c, sn (const TT *) of position t; then the
 * dims r … d−1 are copied. The rows PREFETCH_BYTES ahead are prefetched first, so that the loop's
 * arithmetic does not wait on memory (benchmarks/README.md has the A/B). */
#define FOR_EACH_ROW(T, TT, a, ...)                                                                \
    const Py_ssize_t x_ahead = ahead_bytes((a).xs2 * (Py_ssize_t)sizeof(T));                       \
    const Py_ssize_t o_ahead = ahead_bytes((a).os2 * (Py_ssize_t)sizeof(T));                       \
    for (Py_ssize_t i0 = 0; i0 < (a).n0; i0++)                                                     \
        for (Py_ssize_t i1 = 0; i1 < (a).n1; i1++) {                                               \
            const T *x_head = (const T *)(a).x + i0 * (a).xs0 + i1 * (a).xs1;                      \
            T *o_head = (T *)(a).out + i0 * (a).os0 + i1 * (a).os1;                                \
            for (Py_ssize_t t = 0; t < (a).s; t++) {                                               \
                const T *x = x_head + t * (a).xs2;                                                 \
                T *o = o_head + t * (a).os2;                                                       \
                const TT *c = (const TT *)(a).cos + t * (a).ts, *sn = (const TT *)(a).sin + t * (a).ts; \
                prefetch_rows(x, x_ahead, o, o_ahead, (size_t)(a).d * sizeof(T));                  \
                __VA_ARGS__                                                                        \
                if ((a).r < (a).d) memcpy(o + (a).r, x + (a).r, (size_t)((a).d - (a).r) * sizeof(T)); \
            }                                                                                      \
        }

/* F(…, h) with the pair count h = r/2 a compile-time constant for the common head dims (r = 32, 64,
 * 128), else F(…, h) as it is: with a constant count the row loops are unrolled straight-line code
 * whose loads the CPU can issue ahead. */
#define WITH_PAIRS(h, F, ...)                                                                     \
    switch (h) {                                                                                  \
    case 16: F(__VA_ARGS__, 16); break;                                                           \
    case 32: F(__VA_ARGS__, 32); break;                                                           \
    case 64: F(__VA_ARGS__, 64); break;                                                           \
    default: F(__VA_ARGS__, h);                                                                   \
    }

/* One row of `r` rotated dims, each x loaded as the work type W by LD and stored by ST, each table
 * value (TT) loaded as W by LDT. The pointers
 * are restrict parameters, so the compiler vectorizes without run-time alias checks. Tables: with
 * `paired`, `c`, `sn` hold h = r/2 values per position, one per pair (both columns of a pair equal:
 * half the table traffic, the common case), and out_a = x_a·c − x_b·s; else r values in the pair layout
 * with the sines of column a negated by the caller, so both columns are sums, out_a = x_a·c_a + x_b·sn_a.
 * Every product and the sum are rounded once, as in torch: GCC 12 fuses an alternating −/+ into
 * vfmaddsub despite -ffp-contract=off, in the loop vectorizer (hence the sums of the general form) and
 * in straight-line code (hence -fno-tree-slp-vectorize in the build). */
#define ROTATE_ROW_FNS(NAME, T, W, TT, LD, ST, LDT)                                                \
    static inline __attribute__((always_inline)) void NAME##_half(                                 \
        const T *restrict x, T *restrict o, const TT *restrict c, const TT *restrict sn, Py_ssize_t h, \
        int paired) {                                                                              \
        if (paired) {                                                                              \
            for (Py_ssize_t i = 0; i < h; i++) {                                                   \
                const W xa = LD(x[i]), xb = LD(x[h + i]);                                          \
                o[i] = ST(xa * LDT(c[i]) - xb * LDT(sn[i]));                                       \
                o[h + i] = ST(xb * LDT(c[i]) + xa * LDT(sn[i]));                                   \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (Py_ssize_t i = 0; i < h; i++) {                                                       \
            const W xa = LD(x[i]), xb = LD(x[h + i]);                                              \
            o[i] = ST(xa * LDT(c[i]) + xb * LDT(sn[i]));                                           \
            o[h + i] = ST(xb * LDT(c[h + i]) + xa * LDT(sn[h + i]));                               \
        }                                                                                          \
    }                                                                                              \
    static inline __attribute__((always_inline)) void NAME##_adjacent(                             \
        const T *restrict x, T *restrict o, const TT *restrict c, const TT *restrict sn, Py_ssize_t h, \
        int paired) {                                                                              \
        if (paired) {                                                                              \
            for (Py_ssize_t i = 0; i < h; i++) {                                                   \
                const W xa = LD(x[2 * i]), xb = LD(x[2 * i + 1]);                                  \
                o[2 * i] = ST(xa * LDT(c[i]) - xb * LDT(sn[i]));                                   \
                o[2 * i + 1] = ST(xb * LDT(c[i]) + xa * LDT(sn[i]));                               \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (Py_ssize_t i = 0; i < h; i++) {                                                       \
            const W xa = LD(x[2 * i]), xb = LD(x[2 * i + 1]);                                      \
            o[2 * i] = ST(xa * LDT(c[2 * i]) + xb * LDT(sn[2 * i]));                               \
            o[2 * i + 1] = ST(xb * LDT(c[2 * i + 1]) + xa * LDT(sn[2 * i + 1]));                   \
        }                                                                                          \
    }                                                                                              \
    static inline __attribute__((always_inline)) void NAME##_rows_h(const rotate_args a, Py_ssize_t h) { \
        FOR_EACH_ROW(T, TT, a, {                                                                   \
            if (a.layout == HALF_SPLIT)                                                            \
                NAME##_half(x, o, c, sn, h, a.paired);                                             \
            else                                                                                   \
                NAME##_adjacent(x, o, c, sn, h, a.paired);                                         \
        })                                                                                         \
    }                                                                                              \
    CLONES static void NAME##_rows(const rotate_args a) { WITH_PAIRS(a.r / 2, NAME##_rows_h, a); }

#define SAME(v) (v)
ROTATE_ROW_FNS(rotate_f32, float, float, float, SAME, SAME, SAME)
ROTATE_ROW_FNS(rotate_f64, double, double, double, SAME, SAME, SAME)
ROTATE_ROW_FNS(rotate_bf16, uint16_t, float, float, bf16_to_f32, f32_to_bf16, SAME)
ROTATE_ROW_FNS(rotate_bf16t, uint16_t, float, uint16_t, bf16_to_f32, f32_to_bf16, bf16_to_f32)

#ifdef HAVE_BF16_HW
/* bfloat16 with paired tables and 16 | r/2, by AVX512-BF16: VCVTNEPS2BF16 rounds 16 float32 values to
 * nearest even in one instruction (NaN kept, quiet), where the portable loop spends ~8 integer
 * operations. It flushes float32 subnormals to zero, so a row holding one is redone by the portable loop. */
#define BF16_HW __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define SUBNORMAL 0x20 /* VFPCLASSPS category */

BF16_HW static inline __m512 bf16_widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 table values as float32, from float32 or (widened exactly) from bfloat16 tables. */
BF16_HW static inline __m512 table16_f32(const float *t) { return _mm512_loadu_ps(t); }
BF16_HW static inline __m512 table16_bf16(const uint16_t *t) {
    return bf16_widen(_mm256_loadu_si256((const __m256i *)t));
}

/* out_a = x_a·c − x_b·s, out_b = x_b·c + x_a·s for 16 pairs, as float32; nonzero if one is subnormal. */
BF16_HW static inline int bf16_pairs16(__m512 xa, __m512 xb, __m512 cc, __m512 ss, __m512 *oa, __m512 *ob) {
    *oa = _mm512_sub_ps(_mm512_mul_ps(xa, cc), _mm512_mul_ps(xb, ss));
    *ob = _mm512_add_ps(_mm512_mul_ps(xb, cc), _mm512_mul_ps(xa, ss));
    return (int)(_mm512_fpclass_ps_mask(*oa, SUBNORMAL) | _mm512_fpclass_ps_mask(*ob, SUBNORMAL));
}

/* NAME##_rows: the AVX512-BF16 loop over tables of type TT read by LOAD16; a row with a subnormal is
 * redone by PORTABLE (the portable loop of the same table type). */
#define BF16_HW_ROWS(NAME, TT, LOAD16, PORTABLE)                                                   \
    BF16_HW static inline __attribute__((always_inline)) void NAME##_h(const rotate_args a, Py_ssize_t h) { \
        const __m512i high = _mm512_set1_epi32((int)0xffff0000u);                                  \
        const __m512i weave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, \
                                               23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0); \
        FOR_EACH_ROW(uint16_t, TT, a, {                                                            \
            int subnormal = 0;                                                                     \
            __m512 oa, ob;                                                                         \
            if (a.layout == HALF_SPLIT) {                                                          \
                for (Py_ssize_t i = 0; i < h; i += 16) {                                           \
                    const __m512 xa = bf16_widen(_mm256_loadu_si256((const __m256i *)(x + i)));    \
                    const __m512 xb = bf16_widen(_mm256_loadu_si256((const __m256i *)(x + h + i))); \
                    subnormal |= bf16_pairs16(xa, xb, LOAD16(c + i), LOAD16(sn + i), &oa, &ob);    \
                    _mm256_storeu_si256((__m256i *)(o + i), (__m256i)_mm512_cvtneps_pbh(oa));      \
                    _mm256_storeu_si256((__m256i *)(o + h + i), (__m256i)_mm512_cvtneps_pbh(ob));  \
                }                                                                                  \
            } else { /* 16 pairs = 16 words (x_a low, x_b high): the halves of each word widen in place */ \
                for (Py_ssize_t i = 0; i < h; i += 16) {                                           \
                    const __m512i w = _mm512_loadu_si512((const void *)(x + 2 * i));               \
                    const __m512 xa = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));               \
                    const __m512 xb = _mm512_castsi512_ps(_mm512_and_si512(w, high));              \
                    subnormal |= bf16_pairs16(xa, xb, LOAD16(c + i), LOAD16(sn + i), &oa, &ob);    \
                    /* a in words 0–15, b in 16–31, then interleaved */                            \
                    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(ob, oa);                     \
                    _mm512_storeu_si512((void *)(o + 2 * i), _mm512_permutexvar_epi16(weave, both)); \
                }                                                                                  \
            }                                                                                      \
            if (subnormal) { /* the portable loop rounds subnormals exactly */                     \
                if (a.layout == HALF_SPLIT)                                                        \
                    PORTABLE##_half(x, o, c, sn, h, 1);                                            \
                else                                                                               \
                    PORTABLE##_adjacent(x, o, c, sn, h, 1);                                        \
            }                                                                                      \
        })                                                                                         \
    }                                                                                              \
    BF16_HW static void NAME(const rotate_args a) { WITH_PAIRS(a.r / 2, NAME##_h, a); }

BF16_HW_ROWS(rotate_bf16_hw_rows, float, table16_f32, rotate_bf16)
BF16_HW_ROWS(rotate_bf16t_hw_rows, uint16_t, table16_bf16, rotate_bf16t)

static int bf16_hw(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512bf16");
    }
    return known;
}
#endif

static void rotate_rows(const rotate_args a) {
    if (a.dtype == F32)
        rotate_f32_rows(a);
    else if (a.dtype == F64)
        rotate_f64_rows(a);
#ifdef HAVE_BF16_HW
    else if (a.paired && (a.r / 2) % 16 == 0 && bf16_hw())
        (a.tdtype == BF16 ? rotate_bf16t_hw_rows : rotate_bf16_hw_rows)(a);
#endif
    else
        (a.tdtype == BF16 ? rotate_bf16t_rows : rotate_bf16_rows)(a);
}

/* ---- rotate_qk ---------------------------------------------------------------------------- */

/* One side (queries or keys) of rotate_qk: x, out [b, h, s, d] (strides in elements, unit last stride) at
 * positions pos [pb, s] (pb = 1 broadcasts; strides ps0, ps1) or, where pos is NULL, offset + 0 … s−1. */
typedef struct {
    const char *x;
    char *out;
    const int64_t *pos;
    Py_ssize_t h, s, pb, ps0, ps1, xs0, xs1, xs2, os0, os1, os2;
    int64_t offset;
} qk_side;

typedef struct {
    qk_side side[2];
    const char *cos, *sin; /* the cache [n, r/2] of per-pair values, row stride ts */
    const double *theta;   /* [r/2 + 1]: the frequencies, then the tables' attention factor */
    int dtype, tdtype, layout, inverse;
    Py_ssize_t b, d, r, n, ts;
} qk_args;

#define POSITION_LIMIT 9007199254740992LL /* 2^53: float64 holds every integer below it */

/* The first position of side 0, then side 1, with |t| ≥ 2^53 (in the order of their elements), its side
 * in *which; 0 and *which = -1 if none. */
static int64_t qk_first_bad(const qk_args *a, int *which) {
    for (int w = 0; w < 2; w++) {
        const qk_side *q = &a->side[w];
        if (!q->pos) continue;
        for (Py_ssize_t i = 0; i < q->pb; i++)
            for (Py_ssize_t j = 0; j < q->s; j++) {
                const int64_t t = q->pos[i * q->ps0 + j * q->ps1];
                if (t >= POSITION_LIMIT || t <= -POSITION_LIMIT) return *which = w, t;
            }
    }
    return *which = -1, 0;
}

/* double → bfloat16 rounded once, to nearest even: to float32 rounded to odd (the float32 below |v| with its
 * last bit set where inexact), then to bfloat16, which has 16 fewer bits (Boldo & Melquiond 2008). */
static inline uint16_t f64_to_bf16(double v) {
    float f = (float)v;
    if ((double)f != v && v == v) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if (fabs((double)f) > fabs(v)) u -= 1; /* rounded away from zero: the float32 toward it */
        u |= 1;
        memcpy(&f, &u, 4);
    }
    return f32_to_bf16(f);
}
static inline float f64_to_f32(double v) { return (float)v; }
static inline uint16_t neg_bf16(uint16_t v) { return v ^ 0x8000u; }
static inline float neg_f32(float v) { return -v; }
static inline double neg_f64(double v) { return -v; }

/* NAME##_qk: every (side, batch, token) row: its per-pair table row (the cache row at t for 0 ≤ t < n, else
 * a·cos(t·θ_i), a·sin(t·θ_i) in float64 rounded once by TO_TT; the sines negated by NEG for the inverse)
 * once, then the rows of all heads rotated by ROW's paired half/adjacent functions (ROTATE_ROW_FNS). */
#define QK_ROWS(NAME, ROW, T, TT, TO_TT, NEG)                                                      \
    static inline __attribute__((always_inline)) void NAME##_h(const qk_args a, TT *restrict sc,   \
                                                                TT *restrict ss, Py_ssize_t h) {    \
        const double *theta = a.theta, factor = a.theta[a.r / 2];                                 \
        for (int w = 0; w < 2; w++) {                                                              \
            const qk_side q = a.side[w];                                                           \
            for (Py_ssize_t ib = 0; ib < a.b; ib++)                                                \
                for (Py_ssize_t j = 0; j < q.s; j++) {                                             \
                    const int64_t t = q.pos ? q.pos[(q.pb > 1 ? ib * q.ps0 : 0) + j * q.ps1] : q.offset + j; \
                    const TT *c = sc, *sn = ss;                                                    \
                    if (t >= 0 && t < a.n) {                                                       \
                        c = (const TT *)a.cos + t * a.ts, sn = (const TT *)a.sin + t * a.ts;      \
                        if (a.inverse) {                                                           \
                            for (Py_ssize_t i = 0; i < h; i++) ss[i] = NEG(sn[i]);                 \
                            sn = ss;                                                               \
                        }                                                                          \
                    } else {                                                                       \
                        for (Py_ssize_t i = 0; i < h; i++) {                                       \
                            const double angle = (double)t * theta[i];                             \
                            sc[i] = TO_TT(cos(angle) * factor);                                    \
                            ss[i] = TO_TT(a.inverse ? -(sin(angle) * factor) : sin(angle) * factor); \
                        }                                                                          \
                    }                                                                              \
                    for (Py_ssize_t hh = 0; hh < q.h; hh++) {                                      \
                        const T *x = (const T *)q.x + ib * q.xs0 + hh * q.xs1 + j * q.xs2;         \
                        T *o = (T *)q.out + ib * q.os0 + hh * q.os1 + j * q.os2;                   \
                        if (a.layout == HALF_SPLIT)                                                \
                            ROW##_half(x, o, c, sn, h, 1);                                         \
                        else                                                                       \
                            ROW##_adjacent(x, o, c, sn, h, 1);                                     \
                        if (a.r < a.d) memcpy(o + a.r, x + a.r, (size_t)(a.d - a.r) * sizeof(T));  \
                    }                                                                              \
                }                                                                                  \
        }                                                                                          \
    }                                                                                              \
    CLONES static void NAME##_qk(const qk_args a, TT *sc, TT *ss) { WITH_PAIRS(a.r / 2, NAME##_h, a, sc, ss); }

QK_ROWS(qk_f32, rotate_f32, float, float, f64_to_f32, neg_f32)
QK_ROWS(qk_f64, rotate_f64, double, double, SAME, neg_f64)
QK_ROWS(qk_bf16, rotate_bf16, uint16_t, float, f64_to_f32, neg_f32)
QK_ROWS(qk_bf16t, rotate_bf16t, uint16_t, uint16_t, f64_to_bf16, neg_bf16)

/* Returns 0, -1 if a position is out of range (nothing written then; the value in *bad, its side in
 * *which), -2 when out of memory. */
static int qk_run(const qk_args a, int64_t *bad, int *which) {
    *bad = qk_first_bad(&a, which);
    if (*which >= 0) return -1;
    const size_t item = a.tdtype == F64 ? 8 : a.tdtype == F32 ? 4 : 2;
    char *scratch = (char *)malloc(2 * (size_t)(a.r / 2 + 1) * item); /* a far or inverse table row */
    if (!scratch) return -2;
    char *sc = scratch, *ss = scratch + (size_t)(a.r / 2 + 1) * item;
    if (a.dtype == F32)
        qk_f32_qk(a, (float *)sc, (float *)ss);
    else if (a.dtype == F64)
        qk_f64_qk(a, (double *)sc, (double *)ss);
    else if (a.tdtype == BF16)
        qk_bf16t_qk(a, (uint16_t *)sc, (uint16_t *)ss);
    else
        qk_bf16_qk(a, (float *)sc, (float *)ss);
    free(scratch);
    return 0;
}

/* ---- expi_rows --------------------------------------------------------------------------- */

typedef struct {
    char *out;
    int dtype, layout;
    Py_ssize_t n, b, f, ld; /* n rows of ld elements, f pairs each */
    const double *fine_re, *fine_im, *coarse_re, *coarse_im; /* [b, f] and [⌈n/b⌉, f], row-major */
    int stream; /* rows are built in a scratch row and streamed out (stream_bytes) */
} expi_args;

/* Rows 0 … n−1 of re/im ([n, f] each): row 0 is seed[0] + i·seed[1]; rows m … 2m−1 are rows 0 … m−1 times
 * the factor, seed[2] + i·seed[3] at first and squared after each doubling; each product rounded once.
 * `fac` is scratch for 2f doubles. */
CLONES static void expi_doubling(const double *seed, Py_ssize_t n, Py_ssize_t f, double *restrict re,
                                 double *restrict im, double *restrict fac) {
    double *restrict fr = fac, *restrict fm = fac + f;
    memcpy(re, seed, (size_t)f * sizeof(double));
    memcpy(im, seed + f, (size_t)f * sizeof(double));
    memcpy(fr, seed + 2 * f, (size_t)f * sizeof(double));
    memcpy(fm, seed + 3 * f, (size_t)f * sizeof(double));
    for (Py_ssize_t m = 1; m < n; m *= 2) {
        for (Py_ssize_t r = 0; r < m && m + r < n; r++) {
            const double *restrict ar = re + r * f, *restrict am = im + r * f;
            double *restrict orr = re + (m + r) * f, *restrict om = im + (m + r) * f;
            for (Py_ssize_t i = 0; i < f; i++) {
                orr[i] = ar[i] * fr[i] - am[i] * fm[i];
                om[i] = ar[i] * fm[i] + am[i] * fr[i];
            }
        }
        if (2 * m < n)
            for (Py_ssize_t i = 0; i < f; i++) {
                const double x = fr[i], y = fm[i];
                fr[i] = x * x - y * y;
                fm[i] = x * y + y * x;
            }
    }
}

/* Row `row` = q·b + j: z_i = fine[j, i]·coarse[q, i]; its (Re, Im) stored as `layout` places them.
 * `a` is the arguments by value, as for rotate (FOR_EACH_ROW): the streaming memcpy cannot alias them. */
#define EXPI_BODY(T)                                                                              \
    const Py_ssize_t f = a.f;                                                                     \
    T *scratch = a.stream ? (T *)malloc(2 * (size_t)f * sizeof(T) + 1) : NULL;                    \
    for (Py_ssize_t q = 0, row = 0; row < a.n; q++)                                               \
        for (Py_ssize_t j = 0; j < a.b && row < a.n; j++, row++) {                                \
            const double *restrict fr = a.fine_re + j * f, *restrict fm = a.fine_im + j * f;      \
            const double *restrict cr = a.coarse_re + q * f, *restrict cm = a.coarse_im + q * f;  \
            T *restrict o = scratch ? scratch : (T *)a.out + row * a.ld;                          \
            if (a.layout == SPLIT) {                                                              \
                for (Py_ssize_t i = 0; i < f; i++) {                                              \
                    o[i] = (T)(fr[i] * cr[i] - fm[i] * cm[i]);                                    \
                    o[f + i] = (T)(fr[i] * cm[i] + fm[i] * cr[i]);                                \
                }                                                                                 \
            } else if (a.layout == SWAPPED) {                                                     \
                for (Py_ssize_t i = 0; i < f; i++) {                                              \
                    o[2 * i + 1] = (T)(fr[i] * cr[i] - fm[i] * cm[i]);                            \
                    o[2 * i] = (T)(fr[i] * cm[i] + fm[i] * cr[i]);                                \
                }                                                                                 \
            } else {                                                                              \
                for (Py_ssize_t i = 0; i < f; i++) {                                              \
                    o[2 * i] = (T)(fr[i] * cr[i] - fm[i] * cm[i]);                                \
                    o[2 * i + 1] = (T)(fr[i] * cm[i] + fm[i] * cr[i]);                            \
                }                                                                                 \
            }                                                                                     \
            if (scratch)                                                                          \
                stream_bytes((char *)((T *)a.out + row * a.ld), (const char *)scratch,            \
                             2 * (size_t)f * sizeof(T));                                          \
        }                                                                                         \
    free(scratch);                                                                                \
    fence_if_streamed(a.stream);

CLONES static void expi_f32_rows(const expi_args a) { EXPI_BODY(float) }

CLONES static void expi_f64_rows(const expi_args a) { EXPI_BODY(double) }

static void expi_rows(const expi_args a) {
    if (a.dtype == F32)
        expi_f32_rows(a);
    else
        expi_f64_rows(a);
}

/* The table of rows t = start + step·r, r < n (expi_rows), from the angular frequencies w [f]. Fine rows
 * i·conj(e^(i·step·j·w)) = sin + i·cos and coarse rows conj(e^(i·(start + step·b·q)·w)) = cos − i·sin,
 * each by doubling (expi_doubling) from a first row and a unit factor whose angles (one float64
 * product each) take libm's sin and cos. Returns -2 when out of memory. */
static int expi_table(char *out, int dtype, int layout, Py_ssize_t n, Py_ssize_t b, Py_ssize_t f,
                      Py_ssize_t ld, const double *w, double start, double step, int stream) {
    const Py_ssize_t nb = (n + b - 1) / b, ff = f > 0 ? f : 1;
    double *work = (double *)malloc((size_t)(2 * (b + nb) + 10) * (size_t)ff * sizeof(double));
    if (!work) return -2;
    double *fine_re = work, *fine_im = fine_re + b * f, *coarse_re = fine_im + b * f;
    double *coarse_im = coarse_re + nb * f, *fac = coarse_im + nb * f, *seed = fac + 2 * ff;
    const double coarse_step = step * (double)b;
    for (Py_ssize_t i = 0; i < f; i++) { /* seed: fine first Re, Im, factor Re, Im; then the coarse */
        const double z = 0.0 * w[i], a = start * w[i], fa = step * w[i], ca = coarse_step * w[i];
        seed[i] = sin(z), seed[f + i] = cos(z);
        seed[2 * f + i] = cos(fa), seed[3 * f + i] = -sin(fa);
        seed[4 * f + i] = cos(a), seed[5 * f + i] = -sin(a);
        seed[6 * f + i] = cos(ca), seed[7 * f + i] = -sin(ca);
    }
    expi_doubling(seed, b, f, fine_re, fine_im, fac);
    expi_doubling(seed + 4 * f, nb, f, coarse_re, coarse_im, fac);
    expi_rows((expi_args){out, dtype, layout, n, b, f, ld, fine_re, fine_im, coarse_re, coarse_im, stream});
    free(work);
    return 0;
}

/* ---- slots ------------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t start, len, slot;
    int step; /* 0: every key of the piece uses `slot`; 1: key start + q uses slot + q */
} piece;

/* Cut index row `ix` (k values) into pieces; returns their count, or -1 (and the value in *bad) if a
 * value is outside [0, n). */
static Py_ssize_t cut_pieces(const int64_t *ix, Py_ssize_t k, Py_ssize_t n, piece *p, int64_t *bad) {
    Py_ssize_t count = 0;
    for (Py_ssize_t j = 0; j < k;) {
        const int64_t v = ix[j];
        if (v < 0 || v >= n) return *bad = v, -1;
        Py_ssize_t e = j + 1;
        int step = 0;
        if (e < k && ix[e] == v) {
            while (e < k && ix[e] == v) e++;
        } else if (e < k && ix[e] == v + 1) {
            step = 1;
            while (e < k && ix[e] == ix[e - 1] + 1 && ix[e] < n) e++;
        }
        p[count++] = (piece){j, e - j, (Py_ssize_t)v, step};
        j = e;
    }
    return count;
}

typedef struct {
    const char *src;
    char *dst;
    const int64_t *index; /* [nb, sq, k] */
    int dtype;
    Py_ssize_t nb, g, sq, k, n; /* rows r = (ib·g + h)·sq + i use index row (ib, i) */
} slots_args;

/* x[0 … len−1] summed: runs shorter than 16 in order; longer ones in 16 independent lanes (vectorized
 * without reassociating one chain), the last len mod 16 values by one more load of the final 16 with
 * the lanes already summed masked to +0 (no partial copy: its narrow stores would stall the wide load
 * that reads them back), then the lanes in a tree: l += l + 8, l + 4, l + 2, l + 1. */
#define SUM_FN(NAME, T, I)                                                                        \
    typedef T NAME##_v16 __attribute__((vector_size(16 * sizeof(T))));                           \
    typedef I NAME##_m16 __attribute__((vector_size(16 * sizeof(T))));                           \
    typedef T NAME##_v8 __attribute__((vector_size(8 * sizeof(T))));                             \
    typedef T NAME##_v4 __attribute__((vector_size(4 * sizeof(T))));                             \
    typedef T NAME##_v2 __attribute__((vector_size(2 * sizeof(T))));                             \
    static const I NAME##_keep[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,             \
                                      -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}; \
    static inline __attribute__((always_inline)) T NAME(const T *restrict x, Py_ssize_t len) {    \
        if (len < 16) {                                                                           \
            T sum = 0;                                                                            \
            for (Py_ssize_t q = 0; q < len; q++) sum += x[q];                                     \
            return sum;                                                                           \
        }                                                                                         \
        NAME##_v16 lane = {0}, v;                                                                 \
        Py_ssize_t q = 0;                                                                         \
        for (; q + 16 <= len; q += 16) {                                                          \
            memcpy(&v, x + q, sizeof v);                                                          \
            lane += v;                                                                            \
        }                                                                                         \
        if (q < len) {                                                                            \
            NAME##_m16 keep;                                                                      \
            memcpy(&keep, NAME##_keep + (len - q), sizeof keep);                                  \
            memcpy(&v, x + len - 16, sizeof v);                                                   \
            lane += (NAME##_v16)((NAME##_m16)v & keep);                                           \
        }                                                                                         \
        NAME##_v8 l8 = __builtin_shufflevector(lane, lane, 0, 1, 2, 3, 4, 5, 6, 7) +              \
                       __builtin_shufflevector(lane, lane, 8, 9, 10, 11, 12, 13, 14, 15);         \
        NAME##_v4 l4 = __builtin_shufflevector(l8, l8, 0, 1, 2, 3) + __builtin_shufflevector(l8, l8, 4, 5, 6, 7); \
        NAME##_v2 l2 = __builtin_shufflevector(l4, l4, 0, 1) + __builtin_shufflevector(l4, l4, 2, 3); \
        return l2[0] + l2[1];                                                                     \
    }

/* Row r: gather writes dst [rows, k] from src [rows, n] (or, with ADD, adds to it); the adjoint writes
 * dst [rows, n] from src [rows, k]. */
#define GATHER_FN(NAME, T, ADD)                                                                   \
    CLONES static void NAME(const slots_args *a, Py_ssize_t r, const piece *p, Py_ssize_t np_) {  \
        const T *restrict t = (const T *)a->src + r * a->n;                                       \
        T *restrict o = (T *)a->dst + r * a->k;                                                   \
        for (Py_ssize_t m = 0; m < np_; m++) {                                                    \
            T *restrict to = o + p[m].start;                                                      \
            if (p[m].step && !(ADD)) {                                                            \
                memcpy(to, t + p[m].slot, (size_t)p[m].len * sizeof(T));                          \
            } else if (p[m].step) {                                                               \
                for (Py_ssize_t q = 0; q < p[m].len; q++) to[q] += t[p[m].slot + q];              \
            } else {                                                                              \
                const T v = t[p[m].slot];                                                         \
                for (Py_ssize_t q = 0; q < p[m].len; q++) to[q] = (ADD) ? to[q] + v : v;          \
            }                                                                                     \
        }                                                                                         \
    }
#define SLOTS_FNS(NAME, T, I)                                                                     \
    SUM_FN(NAME##_sum, T, I)                                                                      \
    GATHER_FN(NAME##_gather, T, 0)                                                                \
    GATHER_FN(NAME##_gather_add, T, 1)                                                            \
    CLONES static void NAME##_adjoint(const slots_args *a, Py_ssize_t r, const piece *p, Py_ssize_t np_) { \
        const T *restrict x = (const T *)a->src + r * a->k;                                       \
        T *restrict s = (T *)a->dst + r * a->n;                                                   \
        memset(s, 0, (size_t)a->n * sizeof(T));                                                   \
        for (Py_ssize_t m = 0; m < np_; m++) {                                                    \
            if (p[m].step) {                                                                      \
                for (Py_ssize_t q = 0; q < p[m].len; q++) s[p[m].slot + q] += x[p[m].start + q];  \
            } else {                                                                              \
                s[p[m].slot] += NAME##_sum(x + p[m].start, p[m].len);                             \
            }                                                                                     \
        }                                                                                         \
    }

SLOTS_FNS(slots_f32, float, int32_t)
SLOTS_FNS(slots_f64, double, int64_t)

#define SLOTS_PIECES (1 << 16) /* pieces held at a time (2 MiB): index rows are cut in groups of this size */

enum { GATHER, ADJOINT, GATHER_ADD }; /* slots modes (posenc._native.SLOT_MODES) */

/* Index rows in groups of at most SLOTS_PIECES pieces, each row cut once; then the rows that share a
 * group (all heads) visited in memory order, a contiguous block per head. Returns 0, -1 when an index
 * value is out of range (nothing meaningful is written then), -2 when out of memory. */
static int slots_run(const slots_args *a, int mode, int64_t *bad) {
    const Py_ssize_t k = a->k > 0 ? a->k : 1, group = SLOTS_PIECES / k > 0 ? SLOTS_PIECES / k : 1;
    piece *p = (piece *)malloc((size_t)(group * k) * sizeof(piece));
    Py_ssize_t *first = (Py_ssize_t *)malloc((size_t)(group + 1) * sizeof(Py_ssize_t));
    int status = p && first ? 0 : -2;
    for (Py_ssize_t ib = 0; ib < a->nb && !status; ib++)
        for (Py_ssize_t i0 = 0; i0 < a->sq && !status; i0 += group) {
            const Py_ssize_t rows = a->sq - i0 < group ? a->sq - i0 : group;
            first[0] = 0;
            for (Py_ssize_t i = 0; i < rows && !status; i++) {
                const int64_t *ix = a->index + (ib * a->sq + i0 + i) * a->k;
                const Py_ssize_t count = cut_pieces(ix, a->k, a->n, p + first[i], bad);
                status = count < 0 ? -1 : 0;
                first[i + 1] = first[i] + (count < 0 ? 0 : count);
            }
            for (Py_ssize_t h = 0; h < a->g && !status; h++)
                for (Py_ssize_t i = 0; i < rows; i++) {
                    const Py_ssize_t r = (ib * a->g + h) * a->sq + i0 + i, np_ = first[i + 1] - first[i];
                    const int f32 = a->dtype == F32;
                    if (mode == ADJOINT)
                        (f32 ? slots_f32_adjoint : slots_f64_adjoint)(a, r, p + first[i], np_);
                    else if (mode == GATHER_ADD)
                        (f32 ? slots_f32_gather_add : slots_f64_gather_add)(a, r, p + first[i], np_);
                    else
                        (f32 ? slots_f32_gather : slots_f64_gather)(a, r, p + first[i], np_);
                }
        }
    free(p);
    free(first);
    return status;
}

/* ---- Python entry points ----------------------------------------------------------------- */

static void *as_ptr(unsigned long long p) { return (void *)(uintptr_t)p; }

static PyObject *py_rotate(PyObject *self, PyObject *args) {
    unsigned long long x, out, cos, sin;
    int dtype, tdtype, layout, paired;
    Py_ssize_t n0, n1, s, d, r, xs0, xs1, xs2, os0, os1, os2, ts;
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKKiiinnnnnnnnnnnni", &x, &out, &cos, &sin, &dtype, &tdtype, &layout, &n0,
                          &n1, &s, &d, &r, &xs0, &xs1, &xs2, &os0, &os1, &os2, &ts, &paired))
        return NULL;
    /* tables: the work dtype (float32 for bfloat16 x), or bfloat16 beside bfloat16 x */
    const int tables_ok = tdtype == (dtype == F64 ? F64 : F32) || (dtype == BF16 && tdtype == BF16);
    const Py_ssize_t table_cols = paired ? r / 2 : r;
    if (dtype < F32 || dtype > BF16 || !tables_ok || layout < ADJACENT || layout > HALF_SPLIT || r < 0 ||
        r > d || r % 2 || n0 < 0 || n1 < 1 || s < 1 || (paired != 0 && paired != 1) ||
        (s > 1 && ts < table_cols)) {
        PyErr_SetString(PyExc_ValueError, "rotate: invalid dtype, table dtype, layout or sizes");
        return NULL;
    }
    rotate_args a = {(const char *)as_ptr(x), (char *)as_ptr(out), (const char *)as_ptr(cos),
                     (const char *)as_ptr(sin), dtype, tdtype, layout, n0, n1, s, d, r,
                     xs0, xs1, xs2, os0, os1, os2, ts, paired};
    Py_BEGIN_ALLOW_THREADS rotate_rows(a);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyObject *py_rotate_qk(PyObject *self, PyObject *args) {
    unsigned long long q, k, qo, ko, qp, kp, cos, sin, theta;
    int dtype, tdtype, layout, inverse, has_pos, status, which = -1;
    long long q_off, k_off;
    int64_t bad = 0;
    Py_ssize_t b, d, r, n, ts, hq, sq, qpb, qps0, qps1, hk, sk, kpb, kps0, kps1;
    Py_ssize_t qs[3], qos[3], ks[3], kos[3];
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKKKKKKKiiiiinnnnnnnnnnLnnnnnnnnnnnLnnnnnn", &q, &k, &qo, &ko, &qp, &kp,
                          &cos, &sin, &theta, &dtype, &tdtype, &layout, &inverse, &has_pos, &b, &d, &r, &n,
                          &ts, &hq, &sq, &qpb, &qps0, &qps1, &q_off, &qs[0], &qs[1], &qs[2], &qos[0],
                          &qos[1], &qos[2], &hk, &sk, &kpb, &kps0, &kps1, &k_off, &ks[0], &ks[1], &ks[2],
                          &kos[0], &kos[1], &kos[2]))
        return NULL;
    const int tables_ok = tdtype == (dtype == F64 ? F64 : F32) || (dtype == BF16 && tdtype == BF16);
    if (dtype < F32 || dtype > BF16 || !tables_ok || layout < ADJACENT || layout > HALF_SPLIT || r < 0 ||
        r > d || r % 2 || b < 0 || hq < 0 || sq < 0 || hk < 0 || sk < 0 || n < 0 || (n > 1 && ts < r / 2) ||
        (inverse != 0 && inverse != 1) || (has_pos != 0 && has_pos != 1) ||
        (has_pos && (qpb < 0 || kpb < 0 || (qpb != 1 && qpb != b) || (kpb != 1 && kpb != b))) ||
        (!has_pos && (q_off < 0 || k_off < 0 || q_off > POSITION_LIMIT - sq || k_off > POSITION_LIMIT - sk))) {
        PyErr_SetString(PyExc_ValueError, "rotate_qk: invalid dtype, table dtype, layout, sizes or offsets");
        return NULL;
    }
    const int64_t *q_pos = has_pos ? (const int64_t *)as_ptr(qp) : NULL;
    const int64_t *k_pos = has_pos ? (const int64_t *)as_ptr(kp) : NULL;
    qk_args a = {{{(const char *)as_ptr(q), (char *)as_ptr(qo), q_pos, hq, sq, qpb, qps0, qps1, qs[0], qs[1],
                   qs[2], qos[0], qos[1], qos[2], (int64_t)q_off},
                  {(const char *)as_ptr(k), (char *)as_ptr(ko), k_pos, hk, sk, kpb, kps0, kps1, ks[0], ks[1],
                   ks[2], kos[0], kos[1], kos[2], (int64_t)k_off}},
                 (const char *)as_ptr(cos), (const char *)as_ptr(sin), (const double *)as_ptr(theta),
                 dtype, tdtype, layout, inverse, b, d, r, n, ts};
    Py_BEGIN_ALLOW_THREADS status = qk_run(a, &bad, &which);
    Py_END_ALLOW_THREADS if (status == -2) return PyErr_NoMemory();
    if (status) return Py_BuildValue("iL", which, (long long)bad);
    Py_RETURN_NONE;
}

static PyObject *py_expi_rows(PyObject *self, PyObject *args) {
    unsigned long long out, w;
    int dtype, layout, stream, status;
    Py_ssize_t n, b, f, ld;
    double start, step;
    (void)self;
    if (!PyArg_ParseTuple(args, "KiinnnnKddi", &out, &dtype, &layout, &n, &b, &f, &ld, &w, &start, &step,
                          &stream))
        return NULL;
    /* the scratch of expi_table holds 2(b + ⌈n/b⌉) + 10 rows of f doubles: its size must not overflow */
    const Py_ssize_t most_rows = PY_SSIZE_T_MAX / 16 / (f > 0 ? f : 1) / 4;
    if (dtype < F32 || dtype > F64 || layout < INTERLEAVED || layout > SPLIT || n < 1 || b < 1 || f < 0 ||
        b > most_rows || n > most_rows || (n > 1 && ld < 2 * f) || (stream != 0 && stream != 1)) {
        PyErr_SetString(PyExc_ValueError, "expi_rows: invalid dtype, layout or sizes");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS status = expi_table((char *)as_ptr(out), dtype, layout, n, b, f, ld,
                                               (const double *)as_ptr(w), start, step, stream);
    Py_END_ALLOW_THREADS if (status) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *py_slots(PyObject *self, PyObject *args) {
    unsigned long long src, dst, index;
    int dtype, mode, status;
    int64_t bad = 0;
    Py_ssize_t nb, g, sq, k, n;
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKiinnnnn", &src, &dst, &index, &dtype, &mode, &nb, &g, &sq, &k, &n))
        return NULL;
    if (dtype < F32 || dtype > F64 || mode < GATHER || mode > GATHER_ADD || nb < 0 || g < 0 || sq < 0 || k < 0 || n < 1) {
        PyErr_SetString(PyExc_ValueError, "slots: invalid dtype, mode or sizes");
        return NULL;
    }
    slots_args a = {(const char *)as_ptr(src), (char *)as_ptr(dst), (const int64_t *)as_ptr(index), dtype,
                    nb, g, sq, k, n};
    Py_BEGIN_ALLOW_THREADS status = slots_run(&a, mode, &bad);
    Py_END_ALLOW_THREADS if (status == -2) return PyErr_NoMemory();
    if (status) {
        PyErr_Format(PyExc_IndexError, "index holds %lld, outside the slots [0, %zd)", (long long)bad, n);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"rotate", py_rotate, METH_VARARGS,
     "rotate(x, out, cos, sin, dtype, tdtype, layout, n0, n1, s, d, r, xs0, xs1, xs2, os0, os1, os2, ts, paired)"},
    {"rotate_qk", py_rotate_qk, METH_VARARGS,
     "rotate_qk(q, k, q_out, k_out, q_pos, k_pos, cos, sin, theta, dtype, tdtype, layout, inverse, has_pos, b, d, "
     "r, n, ts, h_q, s_q, pb_q, ps0_q, ps1_q, offset_q, qs0, qs1, qs2, qos0, qos1, qos2, h_k, s_k, pb_k, ps0_k, ps1_k, "
     "offset_k, ks0, ks1, ks2, kos0, kos1, kos2) -> None, or (side, first position |t| >= 2^53)"},
    {"slots", py_slots, METH_VARARGS, "slots(src, dst, index, dtype, mode, nb, g, sq, k, n)"},
    {"expi_rows", py_expi_rows, METH_VARARGS, "expi_rows(out, dtype, layout, n, b, f, ld, w, start, step, stream)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_kernels",
                                    .m_doc = "Fused native loops of posenc (see posenc._native).",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }

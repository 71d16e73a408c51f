/*
 * CRC-32 (ISO 3309, as PNG and gzip use it) by carry-less multiplication: the structure check of
 * a PNG verifies every chunk's CRC, which table methods do at about a cycle a byte; folding
 * 64 bytes a step with PCLMULQDQ does it at a tenth of that. The method is the folding and
 * Barrett reduction of Gopal et al., "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ Instruction" (Intel, 2009), for the bit-reflected polynomial 0xEDB88320.
 *
 * Only on x86-64 with PCLMULQDQ and SSE4.1, checked at run time; elsewhere the Swift tables run.
 */
#include "CShims.h"

#if defined(__x86_64__)
#include <immintrin.h>

int ifw_crc32_fold_available(void) {
    static int available = -1;
    if (available < 0) {
        __builtin_cpu_init();
        available = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    return available;
}

/* The constants x^(k) mod P(x), bit-reflected and shifted, for folding across 512, 128 and 64
 * bits, then P(x) and floor(x^64 / P(x)) for the Barrett reduction. */
static const uint64_t fold512[2] __attribute__((aligned(16))) = {0x0154442bd4ULL, 0x01c6e41596ULL};
static const uint64_t fold128[2] __attribute__((aligned(16))) = {0x01751997d0ULL, 0x00ccaa009eULL};
static const uint64_t fold64[2] __attribute__((aligned(16))) = {0x0163cd6124ULL, 0};
static const uint64_t barrett[2] __attribute__((aligned(16))) = {0x01db710641ULL, 0x01f7011641ULL};

__attribute__((target("pclmul,sse4.1")))
uint32_t ifw_crc32_fold(uint32_t crc, const uint8_t *buf, size_t length) {
    __m128i x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    __m128i k = _mm_load_si128((const __m128i *)fold512);
    buf += 64;
    length -= 64;
    while (length >= 64) {
        __m128i x5 = _mm_clmulepi64_si128(x1, k, 0x00);
        __m128i x6 = _mm_clmulepi64_si128(x2, k, 0x00);
        __m128i x7 = _mm_clmulepi64_si128(x3, k, 0x00);
        __m128i x8 = _mm_clmulepi64_si128(x4, k, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k, 0x11);
        x2 = _mm_clmulepi64_si128(x2, k, 0x11);
        x3 = _mm_clmulepi64_si128(x3, k, 0x11);
        x4 = _mm_clmulepi64_si128(x4, k, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(buf + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(buf + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(buf + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(buf + 0x30)));
        buf += 64;
        length -= 64;
    }
    /* Four lanes into one. */
    k = _mm_load_si128((const __m128i *)fold128);
    __m128i x5 = _mm_clmulepi64_si128(x1, k, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k, 0x11), x2), x5);
    x5 = _mm_clmulepi64_si128(x1, k, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k, 0x11), x3), x5);
    x5 = _mm_clmulepi64_si128(x1, k, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k, 0x11), x4), x5);
    /* The remaining whole blocks of 16. */
    while (length >= 16) {
        x5 = _mm_clmulepi64_si128(x1, k, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)buf)), x5);
        buf += 16;
        length -= 16;
    }
    /* 128 bits to 64. */
    __m128i mask = _mm_setr_epi32(~0, 0, ~0, 0);
    x2 = _mm_clmulepi64_si128(x1, k, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    k = _mm_loadl_epi64((const __m128i *)fold64);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask), k, 0x00), x2);
    /* Barrett reduction to 32 bits. */
    k = _mm_load_si128((const __m128i *)barrett);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask), k, 0x10);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, mask), k, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#else
int ifw_crc32_fold_available(void) { return 0; }
uint32_t ifw_crc32_fold(uint32_t crc, const uint8_t *buf, size_t length) {
    (void)buf;
    (void)length;
    return crc;
}
#endif

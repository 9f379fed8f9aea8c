// Helpers that every kernel may call, in the C subset that OpenCL C and CUDA C++ share
// (the dialect header comes first): f16 and bf16 as their 16 bits with exact conversions,
// integer powers, ints rounded once to a narrow float, and the powers of two of scaled
// products.

#ifndef NATIVE_F16
// f16 bits to f32, exactly. (A dialect with hardware conversions defines NATIVE_F16 and
// its own f16_to_f32 and f32_to_f16, with the same results.)
FN f32 f16_to_f32(u16 h) {
    u32 sign = ((u32)h & 0x8000u) << 16;
    u32 exponent = ((u32)h >> 10) & 0x1fu;
    u32 mantissa = (u32)h & 0x3ffu;
    if (exponent == 0u) {
        // Subnormal (or zero): mantissa * 2^-24, exact in f32.
        f32 magnitude = (f32)mantissa * 5.9604644775390625e-8f;
        return F32_FROM_BITS(sign | F32_BITS(magnitude));
    }
    if (exponent == 31u) {
        return F32_FROM_BITS(sign | 0x7f800000u | (mantissa << 13));
    }
    return F32_FROM_BITS(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// f32 to f16 bits, rounded to nearest even (NaN stays NaN, quiet; overflow is infinity).
FN u16 f32_to_f16(f32 v) {
    u32 x = F32_BITS(v);
    u32 sign = (x >> 16) & 0x8000u;
    u32 a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return (u16)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    if (a >= 0x477ff000u) {
        // 65520 and above round to infinity.
        return (u16)(sign | 0x7c00u);
    }
    if (a >= 0x38800000u) {
        // A normal f16: rebias the exponent, round the 13 dropped bits to even.
        u32 r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (u16)(sign | (r >> 13));
    }
    // Subnormal or zero: the multiple of 2^-24 nearest to v (exact scaling, exact rint);
    // 1024 is the smallest normal, whose bits are the same.
    f32 units = F32_FROM_BITS(a) * 16777216.0f;
    return (u16)(sign | (u32)rint_f32(units));
}
#endif

// bf16 bits to f32, exactly.
FN f32 bf16_to_f32(u16 h) {
    return F32_FROM_BITS((u32)h << 16);
}

#ifndef NATIVE_BF16
// f32 to bf16 bits, rounded to nearest even (NaN stays NaN, quiet).
FN u16 f32_to_bf16(f32 v) {
    u32 x = F32_BITS(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (u16)((x >> 16) | 0x40u);
    }
    return (u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
#endif

// m rounded once, to nearest even, to p <= 24 significant bits, as an exact f32: storing
// it as f16 (p = 11) or bf16 (p = 8) then rounds no further, so an integer reaches a
// narrow float with one rounding.
FN f32 u64_to_f32_bits(u64 m, i32 p) {
    i32 width = 0;
    for (u64 t = m; t != (u64)0; t >>= 1) {
        width++;
    }
    if (width <= p) {
        return (f32)m;
    }
    i32 shift = width - p;
    u64 kept = m >> shift;
    u64 rest = m & (((u64)1 << shift) - (u64)1);
    u64 halfway = (u64)1 << (shift - 1);
    if (rest > halfway || (rest == halfway && (kept & (u64)1) != (u64)0)) {
        kept++;
    }
    return (f32)kept * F32_FROM_BITS((u32)(127 + shift) << 23);
}

// As u64_to_f32_bits, for a signed value.
FN f32 i64_to_f32_bits(i64 v, i32 p) {
    if (v < 0) {
        return -u64_to_f32_bits((u64)0 - (u64)v, p);
    }
    return u64_to_f32_bits((u64)v, p);
}

// base^e, wrapping.
FN u64 pow_u64(u64 base, u64 e) {
    u64 acc = 1;
    while (e != (u64)0) {
        if ((e & (u64)1) != (u64)0) {
            acc *= base;
        }
        base *= base;
        e >>= 1;
    }
    return acc;
}

// base^e, wrapping; a negative exponent gives 0 except for bases 1 and -1.
FN u64 pow_i64(i64 base, i64 e) {
    if (e < 0) {
        if (base == 1) {
            return 1;
        }
        if (base == -1) {
            return (e & 1) != 0 ? ~(u64)0 : (u64)1;
        }
        return 0;
    }
    return pow_u64((u64)base, (u64)e);
}

// 2^k for k in [-126, 127], built from its bits.
FN f32 pow2_f32(i64 k) {
    return F32_FROM_BITS((u32)(k + 127) << 23);
}

// The power of two k with |x| 2^-k in [1, 2), of a finite non-zero x (subnormals too,
// through x 2^64); 0 for zeros, infinities and NaN.
FN i64 exponent_f32(f32 x) {
    u32 big = F32_BITS(x) & 0x7fffffffu;
    if (big == 0u || big >= 0x7f800000u) {
        return 0;
    }
    if (big < 0x00800000u) {
        return (i64)((F32_BITS(F32_FROM_BITS(big) * 18446744073709551616.0f) >> 23)) - 127 - 64;
    }
    return (i64)(big >> 23) - 127;
}

// Helpers that every kernel may call, in the C subset that OpenCL C and CUDA C++ share
// (the dialect header comes first): f16 and bf16 as their 16 bits with exact conversions,
// integer powers, ints rounded once to a narrow float, and the 128-bit sums of integer means.

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

// A 128-bit two's complement integer: the exact sum behind an integer mean.
typedef struct {
    u64 lo;
    u64 hi;
} wide;

FN wide wide_from_i64(i64 v) {
    wide r;
    r.lo = (u64)v;
    r.hi = v < 0 ? ~(u64)0 : (u64)0;
    return r;
}

FN wide wide_from_u64(u64 v) {
    wide r;
    r.lo = v;
    r.hi = 0;
    return r;
}

FN wide wide_add(wide a, wide b) {
    wide r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < a.lo ? (u64)1 : (u64)0);
    return r;
}

FN wide wide_neg(wide a) {
    wide r;
    r.lo = ~a.lo + (u64)1;
    r.hi = ~a.hi + (r.lo == (u64)0 ? (u64)1 : (u64)0);
    return r;
}

// The low 64 bits of a / d for a >= 0 and d > 0 (a mean fits them), by long division.
FN u64 wide_div(wide a, u64 d) {
    u64 q = 0;
    u64 rem = 0;
    for (i32 bit = 127; bit >= 0; bit--) {
        u64 top = rem >> 63;
        u64 next = bit >= 64 ? (a.hi >> (bit - 64)) : (a.lo >> bit);
        rem = (rem << 1) | (next & (u64)1);
        if (top != (u64)0 || rem >= d) {
            rem -= d;
            if (bit < 64) {
                q |= (u64)1 << bit;
            }
        }
    }
    return q;
}

// sum / n truncated toward zero, for a signed sum (0 when n is 0).
FN i64 wide_mean_signed(wide sum, u64 n) {
    if (n == (u64)0) {
        return 0;
    }
    bool negative = (i64)sum.hi < 0;
    u64 q = wide_div(negative ? wide_neg(sum) : sum, n);
    return negative ? (i64)((u64)0 - q) : (i64)q;
}

// sum / n truncated, for an unsigned sum (0 when n is 0).
FN u64 wide_mean_unsigned(wide sum, u64 n) {
    return n == (u64)0 ? (u64)0 : wide_div(sum, n);
}

// 2^n for n in [-126, 127], built from its bits (exact, unlike a device's `exp2`).
fn pow2(n: i32) -> f32 {
    return bitcast<f32>(u32(n + 127) << 23u);
}

// The power of two k with |x| 2^-k in [1, 2), of a finite non-zero f32 (subnormals too);
// 0 for zeros, infinities and NaN.
fn exponent_f32(x: f32) -> i32 {
    let big = bitcast<u32>(x) & 0x7fffffffu;
    if (big == 0u || big >= 0x7f800000u) {
        return 0;
    }
    if (big < 0x00800000u) {
        // A subnormal: its top bit, 31 - clz, stands for 2^(31 - clz - 149).
        return -118 - i32(countLeadingZeros(big));
    }
    return i32(big >> 23u) - 127;
}

fn is_nan(v: ${T}) -> bool {
    return (bitcast<${BITS}>(v) & ${MAGNITUDE}) > ${INFINITY};
}

fn float_max(x: ${T}, y: ${T}) -> ${T} {
    let zeros = bitcast<${T}>(bitcast<${BITS}>(x) & bitcast<${BITS}>(y));
    return select(select(select(max(x, y), zeros, x == y), y, is_nan(y)), x, is_nan(x));
}

fn float_min(x: ${T}, y: ${T}) -> ${T} {
    let zeros = bitcast<${T}>(bitcast<${BITS}>(x) | bitcast<${BITS}>(y));
    return select(select(select(min(x, y), zeros, x == y), y, is_nan(y)), x, is_nan(x));
}

// Round half to even, exactly, keeping the sign of a zero result: lavapipe's f64 `round`
// returns +0 for -0.4 and, in some shaders, 1 for 1.5. Below ${INTEGRAL} every `x - floor(x)`
// and parity test is exact; from there on every float is an integer (or inf or NaN).
fn round_even(x: ${T}) -> ${T} {
    let r = floor(x);
    let d = x - r;
    let odd = r - 2.0 * floor(r * 0.5) != 0.0;
    let y = select(r, r + 1.0, d > 0.5 || (d == 0.5 && odd));
    let zero = select(${T}(0.0), ${T}(-0.0), x < 0.0 || 1.0 / x < 0.0);
    return select(select(y, zero, y == 0.0), x, !(abs(x) < ${INTEGRAL}));
}

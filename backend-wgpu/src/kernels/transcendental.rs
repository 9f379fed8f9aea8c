//! exp, log, sin, cos, tanh and sigmoid of f32 in WGSL, within the conformance bounds
//! (2 ulp; 4 for tanh and sigmoid) on every device: WGSL only promises `exp` to `3 + 2|x|`
//! ulp, `log` to an absolute 2^-21 and `sin`/`cos` to an absolute 2^-11 on [-pi, pi], so
//! the builtins are not used. These are the CPU backend's polynomials (Cephes) in plain
//! multiply-adds, with specials (NaN, infinities, zeros, subnormals) decided on the bits.
//! sin and cos reduce every |x| > pi/4 by Payne-Hanek (x times 2/pi in 64-bit fixed point,
//! from `u32` arithmetic, then products exact in f32), since a three-part pi/4
//! (Cody-Waite) would need a fused multiply-add, which WGSL does not guarantee. f16 and
//! bf16 use them through f32. `pow` of those is computed in f64 ([`POW_F32`]).
//! `tests/transcendentals.rs` checks the bounds over every exponent.

/// The WGSL functions `exp_f32`, `log_f32`, `sin_cos_f32`, `tanh_f32` and `sigmoid_f32`
/// (they need the float helpers' `is_nan` and `pow2`).
pub(crate) const TRANSCENDENTALS: &str = r#"
// a * b + c, rounded twice: WGSL's `fma` may be emulated, and on lavapipe it loses far
// more than the unfused form (67 ulp in exp's range reduction), so it is not used.
fn mad(a: f32, b: f32, c: f32) -> f32 {
    return a * b + c;
}

fn exp_f32(x: f32) -> f32 {
    let c = clamp(x, -104.0, 89.0);
    let n = round(c * 1.44269504);
    let r = mad(n, 2.1219444e-4, mad(n, -0.693359375, c));
    var p = 1.9875691e-4;
    p = mad(p, r, 1.3981999e-3);
    p = mad(p, r, 8.333452e-3);
    p = mad(p, r, 4.1665796e-2);
    p = mad(p, r, 1.6666665e-1);
    p = mad(p, r, 5.0000001e-1);
    let y = mad(p, r * r, r) + 1.0;
    // 2^n in two factors keeps both normal, so subnormal results round once.
    let k = i32(n);
    let half = k >> 1u;
    let result = y * pow2(half) * pow2(k - half);
    let infinity = bitcast<f32>(0x7f800000u);
    return select(select(result, infinity, x > 88.72284), x, is_nan(x));
}

fn log_f32(x: f32) -> f32 {
    let subnormal = x < 1.17549435e-38;
    let bits = bitcast<u32>(select(x, x * 8388608.0, subnormal));
    var e = i32((bits >> 23u) & 0xffu) - 126 - select(0, 23, subnormal);
    var m = bitcast<f32>((bits & 0x807fffffu) | 0x3f000000u);
    if (m < 0.707106781) {
        e -= 1;
        m = m + m - 1.0;
    } else {
        m -= 1.0;
    }
    let z = m * m;
    var p = 7.0376836e-2;
    p = mad(p, m, -1.1514610e-1);
    p = mad(p, m, 1.1676999e-1);
    p = mad(p, m, -1.2420140e-1);
    p = mad(p, m, 1.4249323e-1);
    p = mad(p, m, -1.6668058e-1);
    p = mad(p, m, 2.0000714e-1);
    p = mad(p, m, -2.4999994e-1);
    p = mad(p, m, 3.3333331e-1);
    let ef = f32(e);
    var y = p * m * z;
    y = mad(ef, -2.1219444e-4, y);
    y = mad(z, -0.5, y);
    let result = mad(ef, 0.693359375, m + y);
    let a = bitcast<u32>(x);
    if ((a & 0x7fffffffu) == 0u) {
        return bitcast<f32>(0xff800000u);
    }
    if (is_nan(x) || (a >> 31u) == 1u) {
        return bitcast<f32>(0x7fc00000u);
    }
    if (a == 0x7f800000u) {
        return x;
    }
    return result;
}

fn tanh_f32(x: f32) -> f32 {
    let a = abs(x);
    let z = x * x;
    var p = -5.7049887e-3;
    p = mad(p, z, 2.0639089e-2);
    p = mad(p, z, -5.3739716e-2);
    p = mad(p, z, 1.3331442e-1);
    p = mad(p, z, -3.3333282e-1);
    let small = mad(p * z, x, x);
    let large = 1.0 - 2.0 / (exp_f32(a + a) + 1.0);
    let signed = select(large, -large, x < 0.0);
    return select(select(signed, small, a < 0.625), x, is_nan(x));
}

fn sigmoid_f32(x: f32) -> f32 {
    let e = exp_f32(-abs(x));
    let positive = 1.0 / (1.0 + e);
    return select(select(e * positive, positive, x >= 0.0), x, is_nan(x));
}

// The low and high words of a * b.
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// 2/pi / 4 in 32-bit words after a zero word: enough bits for any f32 exponent.
const TWO_OVER_PI = array<u32, 8>(0x00000000u, 0x28be60dbu, 0x9391054au, 0x7f09d5f4u,
    0x7d4d3770u, 0x36d8a566u, 0x4f10e410u, 0x7f9458eau);

struct Reduced {
    // x - q * pi/2 = r + tail, |r| <= pi/4, |tail| <= ulp(r) / 2
    r: f32,
    tail: f32,
    q: i32,
}

// x = r + tail + q * pi/2 for finite |x| > pi/4 (Payne-Hanek): the product of x's
// significand and the bits of 2/pi that matter, in 2.62 fixed point. The fraction's top
// 48 bits times pi/2 are summed from products that are exact in f32 (12-bit pieces of
// both), so r comes out correctly rounded, with its rounding error in `tail`, whether or
// not the device fuses multiply-adds.
fn reduce_quadrant(x: f32) -> Reduced {
    let bits = bitcast<u32>(x);
    let significand = ((bits & 0x7fffffu) << 8u) | 0x80000000u;
    let exponent = u32(i32((bits >> 23u) & 0xffu) - 126);
    let i = exponent >> 5u;
    let e = exponent & 31u;
    var hi = TWO_OVER_PI[i];
    var mid = TWO_OVER_PI[i + 1u];
    var lo = TWO_OVER_PI[i + 2u];
    let next = TWO_OVER_PI[i + 3u];
    if (e != 0u) {
        hi = (hi << e) | (mid >> (32u - e));
        mid = (mid << e) | (lo >> (32u - e));
        lo = (lo << e) | (next >> (32u - e));
    }
    let low = mul_wide(significand, lo);
    let middle = mul_wide(significand, mid);
    var p_lo = middle.x + low.y;
    var p_hi = middle.y + select(0u, 1u, p_lo < middle.x) + significand * hi;
    // The integer part is the quadrant; round the fraction to the nearest quadrant.
    var q = i32(p_hi >> 30u);
    p_hi &= 0x3fffffffu;
    if ((p_hi & 0x20000000u) != 0u) {
        p_hi -= 0x40000000u;
        q += 1;
    }
    let negative = (p_hi >> 31u) == 1u;
    if (negative) {
        p_lo = ~p_lo + 1u;
        p_hi = ~p_hi + select(0u, 1u, p_lo == 0u);
    }
    var r = 0.0;
    var tail = 0.0;
    if ((p_hi | p_lo) != 0u) {
        // Normalise the 64-bit magnitude; its value is (top:rest) * 2^-(62 + shift).
        var shift = countLeadingZeros(p_hi);
        if (p_hi == 0u) {
            shift = 32u + countLeadingZeros(p_lo);
        }
        var top = p_hi;
        var rest = p_lo;
        if (shift >= 32u) {
            top = p_lo << (shift - 32u);
            rest = 0u;
        } else if (shift > 0u) {
            top = (p_hi << shift) | (p_lo >> (32u - shift));
            rest = p_lo << shift;
        }
        let s = i32(shift);
        let a_hi = f32(top >> 20u) * pow2(-10 - s);
        let a_lo = f32((top >> 8u) & 0xfffu) * pow2(-22 - s);
        let b = f32(((top & 0xffu) << 16u) | (rest >> 16u)) * pow2(-46 - s);
        // pi/2 = P1 + P2 + P3, P1 and P2 of 12 significant bits.
        let p1 = bitcast<f32>(0x3fc91000u);
        let p2 = bitcast<f32>(0xb6957000u);
        let p3 = bitcast<f32>(0xb06f4b9fu);
        let lead = a_hi * p1;
        let small = (a_hi * p2 + a_lo * p1) + (a_lo * p2 + (a_hi + a_lo) * p3 + b * 1.57079637);
        r = lead + small;
        tail = small - (r - lead);
    }
    if (negative != (x < 0.0)) {
        r = -r;
        tail = -tail;
    }
    if (x < 0.0) {
        q = -q;
    }
    return Reduced(r, tail, q);
}

fn sin_cos_f32(x: f32, cosine: bool) -> f32 {
    if (is_nan(x) || abs(x) == bitcast<f32>(0x7f800000u)) {
        return bitcast<f32>(0x7fc00000u);
    }
    var reduced = Reduced(x, 0.0, 0);
    if (abs(x) > 0.785398163) {
        reduced = reduce_quadrant(x);
    }
    let r = reduced.r;
    let q = reduced.q + select(0, 1, cosine);
    let z = r * r;
    // sin(r + tail) = sin(r) + tail cos(r); cos(r + tail) = cos(r) - tail sin(r).
    let s = mad(mad(mad(-1.9515296e-4, z, 8.332161e-3), z, -1.6666655e-1), z * r, r)
        + reduced.tail * (1.0 - 0.5 * z);
    let c = mad(mad(mad(2.4433157e-5, z, -1.3887316e-3), z, 4.1666646e-2), z * z, mad(z, -0.5, 1.0))
        - reduced.tail * r;
    var v = select(s, c, (q & 1) == 1);
    if ((q & 2) == 2) {
        v = -v;
    }
    return v;
}
"#;

/// `pow_f32(x, y)`: f32 (and f16, bf16) powers within 4 ulp, computed in f64 and rounded
/// once: ln(x) to about 2^-50 by the atanh series, times y, and exp by a Taylor series
/// after reducing by ln 2, so even large `y ln x` keep f32's precision. IEEE 754's special
/// cases (as Rust's `powf`) are decided first. Only for adapters with SHADER_F64.
pub(crate) const POW_F32: &str = r#"
fn ln_series(x: f64) -> f64 {
    // x = 2^e m, m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m - 1) / (m + 1).
    let bits = bitcast<u64>(x);
    var e = i32(u32(bits >> 52u)) - 1023;
    var m = bitcast<f64>((bits & 0xffffffffffffflu) | 0x3ff0000000000000lu);
    if (m > 1.4142135623730951) {
        m = m * 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    var p = f64(1.0) / 23.0;
    for (var k = f64(21.0); k > 0.0; k -= 2.0) {
        p = p * z + 1.0 / k;
    }
    return f64(e) * 0.6931471805599453 + 2.0 * s * p;
}

fn exp_series(t: f64) -> f64 {
    let n = round(t * 1.4426950408889634);
    // ln 2 in two parts; n * the first is exact for |n| < 2^21.
    let r = (t - n * 0.693147180369123816490) - n * 1.90821492927058770002e-10;
    var p = f64(1.0);
    for (var k = f64(14.0); k > 0.0; k -= 1.0) {
        p = p * r / k + 1.0;
    }
    let half = i32(n) / 2;
    let scale = bitcast<f64>(u64(u32(half + 1023)) << 52u);
    let rest = bitcast<f64>(u64(u32(i32(n) - half + 1023)) << 52u);
    return p * scale * rest;
}

// Whether finite y is an integer, and whether it is odd.
fn integer_parity(y: f32) -> vec2<bool> {
    let integer = abs(y) >= 8388608.0 || floor(y) == y;
    let odd = integer && abs(y) < 16777216.0 && (i32(y) & 1) == 1;
    return vec2<bool>(integer, odd);
}

fn pow_f32(x: f32, y: f32) -> f32 {
    let infinity = bitcast<f32>(0x7f800000u);
    let nan = bitcast<f32>(0x7fc00000u);
    if (y == 0.0 || x == 1.0) {
        return 1.0;
    }
    if (is_nan(x) || is_nan(y)) {
        return nan;
    }
    let ax = abs(x);
    if (abs(y) == infinity) {
        if (ax == 1.0) {
            return 1.0;
        }
        return select(0.0, infinity, (ax > 1.0) == (y > 0.0));
    }
    let parity = integer_parity(y);
    let negative = (bitcast<u32>(x) >> 31u) == 1u && parity.y;
    if (ax == 0.0 || ax == infinity) {
        // 0^y and inf^y: 0 or inf, with x's sign for odd integer y.
        let big = (ax == 0.0) == (y < 0.0);
        let magnitude = select(0.0, infinity, big);
        return select(magnitude, -magnitude, negative);
    }
    if (x < 0.0 && !parity.x) {
        return nan;
    }
    let t = f64(y) * ln_series(f64(ax));
    var v = 0.0;
    if (t > 89.0) {
        v = infinity;
    } else if (t > -104.0) {
        let w = exp_series(t);
        // From f32::MAX plus half an ulp on, f32 rounding gives infinity.
        v = select(f32(w), infinity, w >= 3.4028235677973366e38);
    }
    return select(v, -v, negative);
}
"#;

/// exp, log, tanh and sigmoid of f64 (fdlibm's exp and log, Cephes' tanh), for templates
/// on adapters with SHADER_F64 and SHADER_INT64; they need the f64 `is_nan`.
pub(crate) const TRANSCENDENTALS_F64: &str = r#"
fn power_of_two_f64(n: i32) -> f64 {
    return bitcast<f64>(u64(u32(n + 1023)) << 52u);
}

fn exp_f64(x: f64) -> f64 {
    if (is_nan(x)) {
        return x;
    }
    if (x > 709.782712893383973096) {
        return bitcast<f64>(0x7ff0000000000000lu);
    }
    if (x < -745.13321910194110842) {
        return 0.0;
    }
    if (abs(x) < 3.7252902984e-09) {
        return 1.0 + x;
    }
    let k = round(x * 1.44269504088896338700);
    let hi = x - k * 6.93147180369123816490e-01;
    let lo = k * 1.90821492927058770002e-10;
    let r = hi - lo;
    let t = r * r;
    let c = r - t * (1.66666666666666019037e-01 + t * (-2.77777777770155933842e-03
        + t * (6.61375632143793436117e-05 + t * (-1.65339022054652515390e-06
        + t * 4.13813679705723846039e-08))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    // 2^k in two factors keeps both finite, so subnormal results round once.
    let n = i32(k);
    let half = n / 2;
    return y * power_of_two_f64(half) * power_of_two_f64(n - half);
}

fn log_f64(v: f64) -> f64 {
    let a = bitcast<u64>(v);
    if ((a & 0x7ffffffffffffffflu) == 0lu) {
        return bitcast<f64>(0xfff0000000000000lu);
    }
    if (is_nan(v) || (a >> 63u) == 1lu) {
        return bitcast<f64>(0x7ff8000000000000lu);
    }
    if (a == 0x7ff0000000000000lu) {
        return v;
    }
    var x = v;
    var k = 0;
    if (x < 2.2250738585072014e-308) {
        x = x * 18014398509481984.0;
        k = -54;
    }
    var high = u32(bitcast<u64>(x) >> 32u);
    let low = u32(bitcast<u64>(x));
    k += i32(high >> 20u) - 1023;
    high &= 0x000fffffu;
    let i = (high + 0x95f64u) & 0x100000u;
    x = bitcast<f64>((u64(high | (i ^ 0x3ff00000u)) << 32u) | u64(low));
    k += i32(i >> 20u);
    let f = x - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01
        + w * 1.531383769920937332e-01));
    let t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01
        + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    let dk = f64(k);
    return dk * 6.93147180369123816490e-01
        - ((hfsq - (s * (hfsq + r) + dk * 1.90821492927058770002e-10)) - f);
}

fn tanh_f64(x: f64) -> f64 {
    let a = abs(x);
    if (is_nan(x)) {
        return x;
    }
    if (a < 0.625) {
        let z = x * x;
        let p = (-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z
            - 1.61468768441708447952e3;
        let q = ((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z
            + 4.84406305325125486048e3;
        return x + x * z * p / q;
    }
    let large = 1.0 - 2.0 / (exp_f64(a + a) + 1.0);
    return select(large, -large, x < 0.0);
}

fn sigmoid_f64(x: f64) -> f64 {
    if (is_nan(x)) {
        return x;
    }
    let e = exp_f64(-abs(x));
    let positive = 1.0 / (1.0 + e);
    return select(e * positive, positive, x >= 0.0);
}
"#;

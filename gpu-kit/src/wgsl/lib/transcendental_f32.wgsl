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

// The error function of f32 and its complement, as fdlibm's s_erf.c computes them (the C
// library's erf and erfc are the same algorithm): rational approximations shared by both
// on [0, 0.84375), [0.84375, 1.25), [1.25, 1/0.35) and [1/0.35, 6) (erfc: 10), then the
// limits; erf within 2 ulp, erfc within 4.

// P(x^2) / Q(x^2), for |x| < 0.84375: erf(x) = x + x * erf_small_f32(x).
fn erf_small_f32(x: f32) -> f32 {
    let z = x * x;
    let p = 1.28379167095512558561e-01
        + z * (-3.25042107247001499370e-01
        + z * (-2.84817495755985104766e-02
        + z * (-5.77027029648944159157e-03
        + z * (-2.37630166566501626084e-05))));
    let q = 1.0
        + z * (3.97917223959155352819e-01
        + z * (6.50222499887672944485e-02
        + z * (5.08130628187576562776e-03
        + z * (1.32494738004321644526e-04
        + z * (-3.96022827877536812320e-06)))));
    return p / q;
}

// P(t) / Q(t) at t = |x| - 1, for 0.84375 <= |x| < 1.25: erf(|x|) = erx + erf_near_one_f32(t).
fn erf_near_one_f32(a: f32) -> f32 {
    let t = a - 1.0;
    let p = -2.36211856075265944077e-03
        + t * (4.14856118683748331666e-01
        + t * (-3.72207876035701323847e-01
        + t * (3.18346619901161753674e-01
        + t * (-1.10894694282396677476e-01
        + t * (3.54783043256182359371e-02
        + t * (-2.16637559486879084300e-03))))));
    let q = 1.0
        + t * (1.06420880400844228286e-01
        + t * (5.40397917702171048937e-01
        + t * (7.18286544141962662868e-02
        + t * (1.26171219808761642112e-01
        + t * (1.36370839120290507362e-02
        + t * (1.19844998467991074170e-02))))));
    return p / q;
}

// erfc(a) for 1.25 <= a < 10: exp(-a^2 - 0.5625 + R(1/a^2) / S(1/a^2)) / a, with a^2 split
// as z^2 + (a - z)(a + z) (z: a with its low 13 bits cleared, so z^2 + 0.5625 is exact).
fn erfc_tail_f32(a: f32) -> f32 {
    let t = 1.0 / (a * a);
    var r: f32;
    var q: f32;
    if (a < 2.857142857142857) {
        r = -9.86494403484714822705e-03
                + t * (-6.93858572707181764372e-01
                + t * (-1.05586262253232909814e+01
                + t * (-6.23753324503260060396e+01
                + t * (-1.62396669462573470355e+02
                + t * (-1.84605092906711035994e+02
                + t * (-8.12874355063065934246e+01
                + t * (-9.81432934416914548592e+00)))))));
        q = 1.0
                + t * (1.96512716674392571292e+01
                + t * (1.37657754143519042600e+02
                + t * (4.34565877475229228821e+02
                + t * (6.45387271733267880336e+02
                + t * (4.29008140027567833386e+02
                + t * (1.08635005541779435134e+02
                + t * (6.57024977031928170135e+00
                + t * (-6.04244152148580987438e-02))))))));
    } else {
        r = -9.86494292470009928597e-03
                + t * (-7.99283237680523006574e-01
                + t * (-1.77579549177547519889e+01
                + t * (-1.60636384855821916062e+02
                + t * (-6.37566443368389627722e+02
                + t * (-1.02509513161107724954e+03
                + t * (-4.83519191608651397019e+02))))));
        q = 1.0
                + t * (3.03380607434824582924e+01
                + t * (3.25792512996573918826e+02
                + t * (1.53672958608443695994e+03
                + t * (3.19985821950859553908e+03
                + t * (2.55305040643316442583e+03
                + t * (4.74528541206955367215e+02
                + t * (-2.24409524465858183362e+01)))))));
    }
    let z = bitcast<f32>(bitcast<u32>(a) & 0xffffe000u);
    return exp_f32(-z * z - 0.5625) * exp_f32((z - a) * (z + a) + r / q) / a;
}

// fdlibm's erf = 0.845062911510467529297, where erf(1 + t) is centred.
const ERX_F32: f32 = 8.45062911510467529297e-01;

fn erf_f32(x: f32) -> f32 {
    if (is_nan(x)) {
        return x;
    }
    let a = abs(x);
    let s = select(1.0, -1.0, x < 0.0);
    if (a < 0.84375) {
        return x + x * erf_small_f32(x);
    }
    if (a < 1.25) {
        return s * (ERX_F32 + erf_near_one_f32(a));
    }
    if (a >= 6.0) {
        return s;
    }
    return s * (1.0 - erfc_tail_f32(a));
}

fn erfc_f32(x: f32) -> f32 {
    if (is_nan(x)) {
        return x;
    }
    let a = abs(x);
    if (a < 0.84375) {
        let y = x * erf_small_f32(x);
        // From 1/4 on, 1/2 - (x - 1/2 + x y) keeps the low bits 1 - (x + x y) would lose.
        return select(1.0 - (x + y), 0.5 - ((x - 0.5) + y), x >= 0.25);
    }
    if (a < 1.25) {
        // 1 - erx is exact: the rounding is the last subtraction's alone.
        let pq = erf_near_one_f32(a);
        return select((1.0 - ERX_F32) - pq, 1.0 + (ERX_F32 + pq), x < 0.0);
    }
    if (x < -6.0) {
        return 2.0;
    }
    if (a >= 10.0) {
        return 0.0;
    }
    let tail = erfc_tail_f32(a);
    return select(tail, 2.0 - tail, x < 0.0);
}

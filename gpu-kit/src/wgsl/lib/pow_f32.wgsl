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

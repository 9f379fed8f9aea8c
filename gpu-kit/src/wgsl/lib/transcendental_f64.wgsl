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

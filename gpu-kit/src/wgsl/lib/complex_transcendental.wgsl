fn atan_f32(v: f32) -> f32 {
    let a = abs(v);
    var base = 0.0;
    var t = a;
    if (a > 2.414213562) {
        base = 1.570796327;
        t = -1.0 / a;
    } else if (a > 0.414213562) {
        base = 0.785398163;
        t = (a - 1.0) / (a + 1.0);
    }
    let z = t * t;
    let p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
        - 3.33329491539e-1) * z * t + t;
    let r = base + p;
    return select(r, -r, v < 0.0);
}

fn negative_sign(v: f32) -> bool {
    return (bitcast<u32>(v) >> 31u) == 1u;
}

// atan2 with IEEE's signed zeros: atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi.
fn atan2_f32(y: f32, x: f32) -> f32 {
    let pi = 3.14159265;
    var r = 0.0;
    if (y == 0.0) {
        r = select(0.0, pi, negative_sign(x));
    } else if (abs(y) <= abs(x)) {
        r = atan_f32(abs(y) / abs(x));
        r = select(r, pi - r, x < 0.0);
    } else {
        r = 1.57079633 - atan_f32(abs(x) / abs(y));
        r = select(r, pi - r, x < 0.0);
    }
    return select(r, -r, negative_sign(y));
}

fn sinh_f32(v: f32) -> f32 {
    let a = abs(v);
    var r = 0.0;
    if (a < 0.5) {
        let z = a * a;
        r = a + a * z * (1.0 / 6.0 + z * (1.0 / 120.0 + z / 5040.0));
    } else {
        let e = exp_f32(a);
        r = 0.5 * (e - 1.0 / e);
    }
    return select(r, -r, v < 0.0);
}

fn cosh_f32(v: f32) -> f32 {
    let e = exp_f32(abs(v));
    return 0.5 * (e + 1.0 / e);
}

fn cexp(z: vec2<f32>) -> vec2<f32> {
    let m = exp_f32(z.x);
    if (z.y == 0.0) {
        return vec2<f32>(m, z.y);
    }
    return m * vec2<f32>(sin_cos_f32(z.y, true), sin_cos_f32(z.y, false));
}

fn clog(z: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(log_f32(cabs(z)), atan2_f32(z.y, z.x));
}

fn csin(z: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(sin_cos_f32(z.x, false) * cosh_f32(z.y), sin_cos_f32(z.x, true) * sinh_f32(z.y));
}

fn ccos(z: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(sin_cos_f32(z.x, true) * cosh_f32(z.y), -sin_cos_f32(z.x, false) * sinh_f32(z.y));
}

// Kahan's tanh: with t = tan y, b = 1 + t^2, s = sinh x, tanh(x + iy) =
// (b s cosh x + i t) / (1 + b s^2), which stays accurate near the poles on the imaginary
// axis; far from it, tanh is sign(x) + i 4 sin y cos y e^-2|x|.
fn ctanh(z: vec2<f32>) -> vec2<f32> {
    if (abs(z.x) > 20.0) {
        let tail = 4.0 * sin_cos_f32(z.y, false) * sin_cos_f32(z.y, true) * exp_f32(-2.0 * abs(z.x));
        return vec2<f32>(select(1.0, -1.0, z.x < 0.0), tail);
    }
    let t = sin_cos_f32(z.y, false) / sin_cos_f32(z.y, true);
    let b = 1.0 + t * t;
    let s = sinh_f32(z.x);
    let d = 1.0 + b * s * s;
    return vec2<f32>(b * s * sqrt(1.0 + s * s) / d, t / d);
}

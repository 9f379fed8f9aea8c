fn cmul(a: vec2<${F}>, b: vec2<${F}>) -> vec2<${F}> {
    return vec2<${F}>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

fn cdiv(a: vec2<${F}>, b: vec2<${F}>) -> vec2<${F}> {
    if (abs(b.x) >= abs(b.y)) {
        let r = b.y / b.x;
        let d = b.x + b.y * r;
        return vec2<${F}>((a.x + a.y * r) / d, (a.y - a.x * r) / d);
    }
    let r = b.x / b.y;
    let d = b.x * r + b.y;
    return vec2<${F}>((a.x * r + a.y) / d, (a.y * r - a.x) / d);
}

fn cabs(a: vec2<${F}>) -> ${F} {
    let m = max(abs(a.x), abs(a.y));
    if (m == 0.0) {
        return m;
    }
    let s = a / m;
    return m * sqrt(s.x * s.x + s.y * s.y);
}

// The principal square root; the imaginary part's sign follows z's, zeros included.
fn csqrt(z: vec2<${F}>) -> vec2<${F}> {
    if (z.x == 0.0 && z.y == 0.0) {
        return vec2<${F}>(0.0, z.y);
    }
    let t = sqrt((abs(z.x) + cabs(z)) * 0.5);
    if (z.x >= 0.0) {
        return vec2<${F}>(t, z.y / (2.0 * t));
    }
    let negative = (bitcast<${BITS}>(z.y) >> ${TOP}u) == ${ONE};
    return vec2<${F}>(abs(z.y) / (2.0 * t), select(t, -t, negative));
}

fn f32_to_f16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    let sign = (x >> 16u) & 0x8000u;
    let a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u | ((a >> 13u) & 0x3ffu);
    }
    if (a >= 0x477ff000u) {
        return sign | 0x7c00u;
    }
    var q = 0u;
    var rest = 0u;
    var half = 0u;
    if (a >= 0x38800000u) {
        let r = a - 0x38000000u;
        q = r >> 13u;
        rest = r & 0x1fffu;
        half = 0x1000u;
    } else {
        let e = a >> 23u;
        if (e < 102u) {
            return sign;
        }
        let m = (a & 0x7fffffu) | 0x800000u;
        let shift = 126u - e;
        q = m >> shift;
        rest = m & ((1u << shift) - 1u);
        half = 1u << (shift - 1u);
    }
    return sign | (q + select(0u, 1u, rest > half || (rest == half && (q & 1u) == 1u)));
}

fn f32_to_bf16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (x >> 16u) | 0x40u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

// The magnitude `m` rounded to `p` significant bits (to nearest even) as an exact f32,
// negated if `negative`.
fn int_to_float(m: u32, negative: bool, p: u32) -> f32 {
    let width = 32u - countLeadingZeros(m);
    var q = m;
    var scale = 1.0;
    if (width > p) {
        let shift = width - p;
        q = m >> shift;
        let rest = m & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (q & 1u) == 1u)) {
            q += 1u;
        }
        scale = pow2(i32(shift));
    }
    let v = f32(q) * scale;
    return select(v, -v, negative);
}

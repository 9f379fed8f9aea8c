struct Unpacked_${T} {
    m: ${U},
    e: i32,
}

// The significand of a finite nonzero magnitude `a` with its hidden bit set, and its
// exponent (subnormals normalised).
fn unpack_significand_${T}(a: ${U}) -> Unpacked_${T} {
    var e = i32(u32(a >> ${BITS}u));
    var m = a & ${MANTISSA};
    if (e == 0) {
        e = 1;
        while ((m & ${HIDDEN}) == 0${S}) {
            m <<= 1u;
            e -= 1;
        }
    } else {
        m |= ${HIDDEN};
    }
    return Unpacked_${T}(m, e);
}

fn float_rem_${T}(x: ${T}, y: ${T}) -> ${T} {
    let ux = bitcast<${U}>(x);
    let sign = ux & ${SIGN_BIT};
    let ax = ux & ${MAGNITUDE};
    let ay = bitcast<${U}>(y) & ${MAGNITUDE};
    if (ay == 0${S} || ay > ${INFINITY} || ax >= ${INFINITY}) {
        return bitcast<${T}>(${NAN});
    }
    if (ax < ay) {
        return x;
    }
    if (ax == ay) {
        return bitcast<${T}>(sign);
    }
    let px = unpack_significand_${T}(ax);
    let py = unpack_significand_${T}(ay);
    var m = px.m;
    var e = px.e;
    for (; e > py.e; e--) {
        if (m >= py.m) {
            m -= py.m;
        }
        if (m == 0${S}) {
            return bitcast<${T}>(sign);
        }
        m <<= 1u;
    }
    if (m >= py.m) {
        m -= py.m;
    }
    if (m == 0${S}) {
        return bitcast<${T}>(sign);
    }
    while ((m & ${HIDDEN}) == 0${S}) {
        m <<= 1u;
        e -= 1;
    }
    if (e > 0) {
        return bitcast<${T}>(sign | (${U}(u32(e)) << ${BITS}u) | (m & ${MANTISSA}));
    }
    return bitcast<${T}>(sign | (m >> u32(1 - e)));
}

fn pow_${U}(base: ${U}, exponent: ${U}) -> ${U} {
    var acc = ${U}(1);
    var b = base;
    var e = exponent;
    while (e > ${U}(0)) {
        if ((e & ${U}(1)) == ${U}(1)) {
            acc *= b;
        }
        b *= b;
        e >>= 1u;
    }
    return acc;
}

fn pow_${I}(base: ${I}, exponent: ${I}) -> ${I} {
    if (exponent < ${I}(0)) {
        if (base == ${I}(1)) {
            return ${I}(1);
        }
        if (base == ${I}(-1)) {
            return select(${I}(-1), ${I}(1), (exponent & ${I}(1)) == ${I}(0));
        }
        return ${I}(0);
    }
    return bitcast<${I}>(pow_${U}(bitcast<${U}>(base), bitcast<${U}>(exponent)));
}

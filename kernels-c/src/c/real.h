// Float helpers, written once for the real type REAL: the includer defines REAL (f32 or
// f64) and R_(name) (name##_f32 or name##_f64), and the dialect's math names.

// Whether v is +inf or -inf (without the builtins, whose names differ by dialect).
FN bool R_(is_inf)(REAL v) {
    return v == v && v - v != v - v;
}

// Whether v is neither infinite nor NaN.
FN bool R_(is_finite)(REAL v) {
    return v - v == v - v;
}

// The larger; NaN if either is; +0 above -0.
FN REAL R_(max_nan)(REAL x, REAL y) {
    if (x != x) {
        return x;
    }
    if (y != y) {
        return y;
    }
    if (x == y) {
        // Equal zeros: +0 + -0 is +0, -0 + -0 is -0.
        return x == (REAL)0 ? x + y : x;
    }
    return x > y ? x : y;
}

// The smaller; NaN if either is; -0 below +0.
FN REAL R_(min_nan)(REAL x, REAL y) {
    if (x != x) {
        return x;
    }
    if (y != y) {
        return y;
    }
    if (x == y) {
        return x == (REAL)0 ? -(-x + -y) : x;
    }
    return x < y ? x : y;
}

// -1, 0 or 1; NaN and signed zeros kept.
FN REAL R_(sign)(REAL x) {
    if (x != x || x == (REAL)0) {
        return x;
    }
    return x > (REAL)0 ? (REAL)1 : (REAL)-1;
}

// max(x, 0), NaN propagating.
FN REAL R_(relu)(REAL x) {
    return (x > (REAL)0 || x != x) ? x : (REAL)0;
}

// 1 / (1 + e^-x), without losing tiny results to exp's overflow.
FN REAL R_(sigmoid)(REAL x) {
    if (x < (REAL)0) {
        REAL e = R_(exp)(x);
        return e / ((REAL)1 + e);
    }
    return (REAL)1 / ((REAL)1 + R_(exp)(-x));
}

// Complex arithmetic, written once for the complex type CPLX of part type REAL: the
// includer defines CPLX (c64 or c128), REAL, R_(name), C_(name) (name##_c64 ...) and
// CMAKE(re, im). Vector operators differ between dialects, so everything is a function.

FN CPLX C_(add)(CPLX a, CPLX b) {
    return CMAKE(a.x + b.x, a.y + b.y);
}

FN CPLX C_(sub)(CPLX a, CPLX b) {
    return CMAKE(a.x - b.x, a.y - b.y);
}

FN CPLX C_(neg)(CPLX a) {
    return CMAKE(-a.x, -a.y);
}

FN CPLX C_(mul)(CPLX a, CPLX b) {
    return CMAKE(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// Smith's division, which neither overflows nor underflows where the quotient does not.
FN CPLX C_(div)(CPLX a, CPLX b) {
    if (R_(fabs)(b.x) >= R_(fabs)(b.y)) {
        REAL r = b.y / b.x;
        REAL d = b.x + b.y * r;
        return CMAKE((a.x + a.y * r) / d, (a.y - a.x * r) / d);
    }
    REAL r = b.x / b.y;
    REAL d = b.x * r + b.y;
    return CMAKE((a.x * r + a.y) / d, (a.y * r - a.x) / d);
}

FN REAL C_(abs)(CPLX a) {
    return R_(hypot)(a.x, a.y);
}

FN bool C_(eq)(CPLX a, CPLX b) {
    return a.x == b.x && a.y == b.y;
}

FN CPLX C_(sign)(CPLX a) {
    if (a.x == (REAL)0 && a.y == (REAL)0) {
        return a;
    }
    REAL m = C_(abs)(a);
    return CMAKE(a.x / m, a.y / m);
}

// The principal square root; the imaginary part's sign follows z's, zeros included.
FN CPLX C_(sqrt)(CPLX z) {
    if (z.x == (REAL)0 && z.y == (REAL)0) {
        return CMAKE((REAL)0, z.y);
    }
    REAL t = R_(sqrt)((R_(fabs)(z.x) + C_(abs)(z)) * (REAL)0.5);
    if (z.x >= (REAL)0) {
        return CMAKE(t, z.y / ((REAL)2 * t));
    }
    bool negative = z.y < (REAL)0 || (z.y == (REAL)0 && (REAL)1 / z.y < (REAL)0);
    return CMAKE(R_(fabs)(z.y) / ((REAL)2 * t), negative ? -t : t);
}

// e^z, with the corner cases of C99's cexp (and num_complex): e^(-inf + iy) = 0 for any
// y that is not finite, e^(+inf + iy) keeps inf for y zero or not finite.
FN CPLX C_(exp)(CPLX z) {
    if (R_(is_inf)(z.x)) {
        if (z.x < (REAL)0) {
            if (!R_(is_finite)(z.y)) {
                return CMAKE((REAL)0, (REAL)0);
            }
        } else if (z.y == (REAL)0 || !R_(is_finite)(z.y)) {
            return CMAKE(z.x, R_(is_inf)(z.y) ? z.y - z.y : z.y);
        }
    } else if (z.x != z.x && z.y == (REAL)0) {
        return z;
    }
    REAL m = R_(exp)(z.x);
    if (z.y == (REAL)0) {
        return CMAKE(m, z.y);
    }
    return CMAKE(m * R_(cos)(z.y), m * R_(sin)(z.y));
}

FN CPLX C_(log)(CPLX z) {
    return CMAKE(R_(log)(C_(abs)(z)), R_(atan2)(z.y, z.x));
}

FN CPLX C_(sin)(CPLX z) {
    return CMAKE(R_(sin)(z.x) * R_(cosh)(z.y), R_(cos)(z.x) * R_(sinh)(z.y));
}

FN CPLX C_(cos)(CPLX z) {
    return CMAKE(R_(cos)(z.x) * R_(cosh)(z.y), -(R_(sin)(z.x) * R_(sinh)(z.y)));
}

// Kahan's tanh: with t = tan y, b = 1 + t^2, s = sinh x, tanh(x + iy) =
// (b s cosh x + i t) / (1 + b s^2), accurate near the poles on the imaginary axis; far
// from it, tanh is sign(x) + i 4 sin y cos y e^-2|x|.
FN CPLX C_(tanh)(CPLX z) {
    if (R_(fabs)(z.x) > (REAL)20) {
        REAL tail = (REAL)4 * R_(sin)(z.y) * R_(cos)(z.y) * R_(exp)((REAL)-2 * R_(fabs)(z.x));
        return CMAKE(z.x < (REAL)0 ? (REAL)-1 : (REAL)1, tail);
    }
    REAL t = R_(sin)(z.y) / R_(cos)(z.y);
    REAL b = (REAL)1 + t * t;
    REAL s = R_(sinh)(z.x);
    REAL d = (REAL)1 + b * s * s;
    return CMAKE(b * s * R_(sqrt)((REAL)1 + s * s) / d, t / d);
}

FN CPLX C_(recip)(CPLX z) {
    return C_(div)(CMAKE((REAL)1, (REAL)0), z);
}

FN CPLX C_(sigmoid)(CPLX z) {
    return C_(recip)(C_(add)(CMAKE((REAL)1, (REAL)0), C_(exp)(C_(neg)(z))));
}

// x^y = e^(y log x), and x^0 = 1 (as num_complex's powc, the suite's reference).
FN CPLX C_(pow)(CPLX x, CPLX y) {
    if (y.x == (REAL)0 && y.y == (REAL)0) {
        return CMAKE((REAL)1, (REAL)0);
    }
    return C_(exp)(C_(mul)(y, C_(log)(x)));
}

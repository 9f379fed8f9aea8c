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

// The error function and its complement, as fdlibm's s_erf.c computes them: rational
// approximations shared by both on [0, 0.84375), [0.84375, 1.25), [1.25, 1/0.35) and
// [1/0.35, 6) (erfc: 28), then the limits. erf within 1 ulp of f32 and f64 given a
// correctly rounded exp (checked against the CPU's libm); erfc within 4.

// P(x^2) / Q(x^2), for |x| < 0.84375: erf(x) = x + x * erf_small(x).
FN REAL R_(erf_small)(REAL x) {
    REAL z = x * x;
    REAL p = (REAL)1.28379167095512558561e-01
        + z * ((REAL)-3.25042107247001499370e-01
        + z * ((REAL)-2.84817495755985104766e-02
        + z * ((REAL)-5.77027029648944159157e-03
        + z * ((REAL)-2.37630166566501626084e-05))));
    REAL q = (REAL)1
        + z * ((REAL)3.97917223959155352819e-01
        + z * ((REAL)6.50222499887672944485e-02
        + z * ((REAL)5.08130628187576562776e-03
        + z * ((REAL)1.32494738004321644526e-04
        + z * ((REAL)-3.96022827877536812320e-06)))));
    return p / q;
}

// P(t) / Q(t) at t = |x| - 1, for 0.84375 <= |x| < 1.25: erf(|x|) = erx + erf_near_one(|x|).
FN REAL R_(erf_near_one)(REAL a) {
    REAL t = a - (REAL)1;
    REAL p = (REAL)-2.36211856075265944077e-03
        + t * ((REAL)4.14856118683748331666e-01
        + t * ((REAL)-3.72207876035701323847e-01
        + t * ((REAL)3.18346619901161753674e-01
        + t * ((REAL)-1.10894694282396677476e-01
        + t * ((REAL)3.54783043256182359371e-02
        + t * ((REAL)-2.16637559486879084300e-03))))));
    REAL q = (REAL)1
        + t * ((REAL)1.06420880400844228286e-01
        + t * ((REAL)5.40397917702171048937e-01
        + t * ((REAL)7.18286544141962662868e-02
        + t * ((REAL)1.26171219808761642112e-01
        + t * ((REAL)1.36370839120290507362e-02
        + t * ((REAL)1.19844998467991074170e-02))))));
    return p / q;
}

// erfc(a) for a >= 1.25: exp(-a^2 - 0.5625 + R(1/a^2) / S(1/a^2)) / a, with a^2 split as
// z^2 + (a - z)(a + z) (z: a's high bits, R_HIGH, so that z^2 + 0.5625 is exact).
FN REAL R_(erfc_tail)(REAL a) {
    REAL t = (REAL)1 / (a * a);
    REAL r;
    REAL q;
    if (a < (REAL)2.857142857142857) {
        r = (REAL)-9.86494403484714822705e-03
                + t * ((REAL)-6.93858572707181764372e-01
                + t * ((REAL)-1.05586262253232909814e+01
                + t * ((REAL)-6.23753324503260060396e+01
                + t * ((REAL)-1.62396669462573470355e+02
                + t * ((REAL)-1.84605092906711035994e+02
                + t * ((REAL)-8.12874355063065934246e+01
                + t * ((REAL)-9.81432934416914548592e+00)))))));
        q = (REAL)1
                + t * ((REAL)1.96512716674392571292e+01
                + t * ((REAL)1.37657754143519042600e+02
                + t * ((REAL)4.34565877475229228821e+02
                + t * ((REAL)6.45387271733267880336e+02
                + t * ((REAL)4.29008140027567833386e+02
                + t * ((REAL)1.08635005541779435134e+02
                + t * ((REAL)6.57024977031928170135e+00
                + t * ((REAL)-6.04244152148580987438e-02))))))));
    } else {
        r = (REAL)-9.86494292470009928597e-03
                + t * ((REAL)-7.99283237680523006574e-01
                + t * ((REAL)-1.77579549177547519889e+01
                + t * ((REAL)-1.60636384855821916062e+02
                + t * ((REAL)-6.37566443368389627722e+02
                + t * ((REAL)-1.02509513161107724954e+03
                + t * ((REAL)-4.83519191608651397019e+02))))));
        q = (REAL)1
                + t * ((REAL)3.03380607434824582924e+01
                + t * ((REAL)3.25792512996573918826e+02
                + t * ((REAL)1.53672958608443695994e+03
                + t * ((REAL)3.19985821950859553908e+03
                + t * ((REAL)2.55305040643316442583e+03
                + t * ((REAL)4.74528541206955367215e+02
                + t * ((REAL)-2.24409524465858183362e+01)))))));
    }
    REAL z = R_HIGH(a);
    return R_(exp)(-z * z - (REAL)0.5625) * R_(exp)((z - a) * (z + a) + r / q) / a;
}

// fdlibm's erx, where erf(1 + t) is centred.
#define R_ERX ((REAL)8.45062911510467529297e-01)

FN REAL R_(erf)(REAL x) {
    if (x != x) {
        return x;
    }
    REAL a = x < (REAL)0 ? -x : x;
    REAL s = x < (REAL)0 ? (REAL)-1 : (REAL)1;
    if (a < (REAL)0.84375) {
        return x + x * R_(erf_small)(x);
    }
    if (a < (REAL)1.25) {
        return s * (R_ERX + R_(erf_near_one)(a));
    }
    if (a >= (REAL)6) {
        return s;
    }
    return s * ((REAL)1 - R_(erfc_tail)(a));
}

FN REAL R_(erfc)(REAL x) {
    if (x != x) {
        return x;
    }
    REAL a = x < (REAL)0 ? -x : x;
    if (a < (REAL)0.84375) {
        REAL y = x * R_(erf_small)(x);
        // From 1/4 on, 1/2 - (x - 1/2 + x y) keeps the low bits 1 - (x + x y) would lose.
        return x < (REAL)0.25 ? (REAL)1 - (x + y) : (REAL)0.5 - ((x - (REAL)0.5) + y);
    }
    if (a < (REAL)1.25) {
        // 1 - erx is exact: the rounding is the last subtraction's alone.
        REAL pq = R_(erf_near_one)(a);
        return x < (REAL)0 ? (REAL)1 + (R_ERX + pq) : ((REAL)1 - R_ERX) - pq;
    }
    if (x < (REAL)-6) {
        return (REAL)2;
    }
    if (a >= (REAL)28) {
        return (REAL)0;
    }
    REAL tail = R_(erfc_tail)(a);
    return x < (REAL)0 ? (REAL)2 - tail : tail;
}
#undef R_ERX

//! Vectorised f32 transcendentals: branch-free kernels after Cephes (Cody-Waite range
//! reduction and minimax polynomials) written so the compiler turns each slice loop into
//! SIMD code, compiled for AVX-512, AVX2+FMA and baseline x86-64 and chosen at run time.
//!
//! Accuracy (checked by the conformance suite against an f64 reference): exp, log, sin,
//! cos and erf within 2 ulp (erf 3 without FMA), tanh, sigmoid and erfc within 4 (erfc
//! past 0.5 in Sun's `s_erff.c` forms, where `1 - erf` cancels; a scan of every 5th f32
//! finds 3). sin and cos take arguments up to 8192 in
//! magnitude on the fast path; larger or non-finite arguments are fixed up with libm.

// The polynomial coefficients are Cephes' published values, quoted as published.
#![allow(clippy::excessive_precision)]

use polytensor_core::UnaryOp;

/// How a kernel computes `a * b + c`: fused where the CPU has FMA, separately otherwise
/// (a software `fma` call would stop vectorisation).
trait MulAdd: Copy {
    fn mul_add(a: f32, b: f32, c: f32) -> f32;

    /// `a * a - square` exactly, for `square = a * a` rounded: what rounding lost.
    fn square_error(a: f32, square: f32) -> f32;
}

#[derive(Clone, Copy)]
struct Fused;
impl MulAdd for Fused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }

    #[inline(always)]
    fn square_error(a: f32, square: f32) -> f32 {
        a.mul_add(a, -square)
    }
}

#[derive(Clone, Copy)]
struct Separate;
impl MulAdd for Separate {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }

    /// Dekker's product: `a` split into halves of 12 bits, whose products are exact.
    #[inline(always)]
    fn square_error(a: f32, square: f32) -> f32 {
        let scaled = a * 4097.0;
        let high = scaled - (scaled - a);
        let low = a - high;
        ((high * high - square) + 2.0 * high * low) + low * low
    }
}

/// Round to nearest even for |v| < 2^22, without a libm call.
#[inline(always)]
fn round_even(v: f32) -> f32 {
    (v + ROUNDING_MAGIC) - ROUNDING_MAGIC
}

/// 1.5 * 2^23: added to |v| < 2^22, it leaves `v` rounded to an integer in the low bits.
const ROUNDING_MAGIC: f32 = 12_582_912.0;

/// The integral `v` (|v| < 2^22) as an `i32`, read from the bits of `v + 1.5 * 2^23`. An
/// `as` cast saturates and maps NaN to 0 lane by lane, which compiles to scalar code in
/// the middle of a vector loop (it made `exp` 4x slower); other `v` give some integer.
#[inline(always)]
fn integral(v: f32) -> i32 {
    ((v + ROUNDING_MAGIC).to_bits() as i32).wrapping_sub(ROUNDING_MAGIC.to_bits() as i32)
}

/// `2^n` for `n` in [-126, 127], built from its bits.
#[inline(always)]
fn pow2(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) as u32) << 23)
}

#[inline(always)]
fn exp<M: MulAdd>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    let clamped = x.clamp(-104.0, 89.0);
    let n = round_even(clamped * LOG2E);
    let r = M::mul_add(n, -C2, M::mul_add(n, -C1, clamped));
    let mut p = 1.987_569_1e-4;
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        5.000_000_1e-1,
    ] {
        p = M::mul_add(p, r, c);
    }
    let y = M::mul_add(p, r * r, r) + 1.0;
    // 2^n in two steps keeps both factors normal, so subnormal results round once.
    // NaN (only from a NaN `x`) gives some `n`; `y` is NaN then, and so is the result.
    let n = integral(n);
    let half = n >> 1;
    let result = y * pow2(half) * pow2(n.wrapping_sub(half));
    if x > 88.722_84 {
        f32::INFINITY
    } else {
        result
    }
}

#[inline(always)]
fn log<M: MulAdd>(x: f32) -> f32 {
    const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
    // Subnormals: scale into the normal range first.
    let subnormal = x < f32::MIN_POSITIVE;
    let scaled = if subnormal { x * 8_388_608.0 } else { x };
    let bits = scaled.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 126 - if subnormal { 23 } else { 0 };
    let mut m = f32::from_bits((bits & 0x807f_ffff) | 0x3f00_0000);
    if m < SQRT_HALF {
        e -= 1;
        m = m + m - 1.0;
    } else {
        m -= 1.0;
    }
    let z = m * m;
    let mut p = 7.037_683_6e-2;
    for c in [
        -1.151_461e-1,
        1.167_699_9e-1,
        -1.242_014e-1,
        1.424_932_3e-1,
        -1.666_805_8e-1,
        2.000_071_4e-1,
        -2.499_999_4e-1,
        3.333_333_1e-1,
    ] {
        p = M::mul_add(p, m, c);
    }
    let e = e as f32;
    let mut y = p * m * z;
    y = M::mul_add(e, -2.121_944_4e-4, y);
    y = M::mul_add(z, -0.5, y);
    let result = M::mul_add(e, 0.693_359_4, m + y);
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if x < 0.0 || x.is_nan() {
        f32::NAN
    } else if x == f32::INFINITY {
        f32::INFINITY
    } else {
        result
    }
}

/// sin (`COS = false`) or cos (`COS = true`) for |x| <= 8192.
#[inline(always)]
fn sin_cos<M: MulAdd, const COS: bool>(x: f32) -> f32 {
    const FOPI: f32 = 1.273_239_5; // 4 / pi
    const DP1: f32 = 0.785_156_25;
    const DP2: f32 = 2.418_756_5e-4;
    const DP3: f32 = 3.774_895e-8;
    let a = x.abs();
    // Large and non-finite arguments give some `j` and are fixed up by the caller (`min`
    // keeps the floor's argument a number below 2^22); wrap rather than trap.
    let mut j = integral((a * FOPI).min(16_384.0).floor());
    j = j.wrapping_add(j & 1);
    let y = j as f32;
    let r = M::mul_add(y, -DP3, M::mul_add(y, -DP2, M::mul_add(y, -DP1, a)));
    let z = r * r;
    let sin_poly = M::mul_add(
        M::mul_add(
            M::mul_add(-1.951_529_6e-4, z, 8.332_161e-3),
            z,
            -1.666_665_5e-1,
        ),
        z * r,
        r,
    );
    let cos_poly = M::mul_add(
        M::mul_add(
            M::mul_add(2.443_315_7e-5, z, -1.388_731_6e-3),
            z,
            4.166_664_6e-2,
        ),
        z * z,
        M::mul_add(z, -0.5, 1.0),
    );
    let octant = if COS { j.wrapping_add(2) } else { j };
    let value = if octant & 2 != 0 { cos_poly } else { sin_poly };
    let negative = (octant & 4 != 0) != (!COS && x < 0.0);
    if negative {
        -value
    } else {
        value
    }
}

#[inline(always)]
fn tanh<M: MulAdd>(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let mut p = -5.704_988_7e-3;
    for c in [
        2.063_908_9e-2,
        -5.373_971_6e-2,
        1.333_144_2e-1,
        -3.333_328_2e-1,
    ] {
        p = M::mul_add(p, z, c);
    }
    let small = M::mul_add(p * z, x, x);
    let e = exp::<M>(a + a);
    let large = 1.0 - 2.0 / (e + 1.0);
    let large = if x < 0.0 { -large } else { large };
    if a < 0.625 {
        small
    } else {
        large
    }
}

#[inline(always)]
fn sigmoid<M: MulAdd>(x: f32) -> f32 {
    let e = exp::<M>(-x.abs());
    let positive = 1.0 / (1.0 + e);
    if x >= 0.0 {
        positive
    } else {
        e * positive
    }
}

/// `erf(x)` for `|x| < 1`: `x * T(x^2)` (Cephes' `erff`).
#[inline(always)]
fn erf_small<M: MulAdd>(x: f32) -> f32 {
    let z = x * x;
    let mut p = 7.853_861_353_153_693e-5;
    for c in [
        -8.010_193_625_184_903e-4,
        5.188_327_685_732_524e-3,
        -2.685_381_193_529_856e-2,
        1.128_358_514_861_418e-1,
        -3.761_262_582_423_300e-1,
        1.128_379_165_726_710,
    ] {
        p = M::mul_add(p, z, c);
    }
    x * p
}

/// Past this, `erfc(x)` is below the smallest subnormal f32.
const ERFC_ZERO: f32 = 10.06;

/// `erfc(a)` for `a >= 1`: `exp(-a^2) / a * P(1/a^2)` (Cephes' `erfcf`), with `a^2` split
/// into two parts so that `exp` sees it exactly; 0 past [`ERFC_ZERO`].
#[inline(always)]
fn erfc_large<M: MulAdd>(a: f32) -> f32 {
    let zero = a > ERFC_ZERO;
    // Computed at 1 where the result is 0: subnormal intermediates are slow to compute.
    let a = if zero { 1.0 } else { a };
    let hi = a * a;
    let lo = M::square_error(a, hi);
    let e = exp::<M>(-hi) * (1.0 - lo);
    let q = 1.0 / a;
    let y = q * q;
    let mut near = 2.326_819_970_068_386e-2;
    for c in [
        -1.387_039_388_740_657e-1,
        3.687_424_674_597_105e-1,
        -5.824_733_027_278_666e-1,
        6.210_004_621_745_983e-1,
        -4.944_515_323_274_145e-1,
        3.404_879_937_665_872e-1,
        -2.741_127_028_184_656e-1,
        5.638_259_427_386_472e-1,
    ] {
        near = M::mul_add(near, y, c);
    }
    let mut far = -1.047_766_399_936_249e1;
    for c in [
        1.297_719_955_372_516e1,
        -7.495_518_717_768_503,
        2.921_019_019_210_786,
        -1.015_265_279_202_700,
        4.218_463_358_204_948e-1,
        -2.820_767_439_740_514e-1,
        5.641_895_067_754_075e-1,
    ] {
        far = M::mul_add(far, y, c);
    }
    let r = e * q * if a < 2.0 { near } else { far };
    if zero {
        0.0
    } else {
        r
    }
}

#[inline(always)]
fn erf<M: MulAdd>(x: f32) -> f32 {
    let a = x.abs();
    let large = 1.0 - erfc_large::<M>(a);
    let large = if x < 0.0 { -large } else { large };
    if a < 1.0 {
        erf_small::<M>(x)
    } else {
        large
    }
}

#[inline(always)]
fn erfc<M: MulAdd>(x: f32) -> f32 {
    let a = x.abs();
    let positive = erfc_sun::<M>(a);
    let signed = if x < 0.0 { 2.0 - positive } else { positive };
    if a < 0.5 {
        1.0 - erf_small::<M>(x)
    } else {
        signed
    }
}

/// The exact GELU, `(0.5 * x) * erfc(-x * (1/√2))`, rounded as Keras's five ops are.
#[inline(always)]
fn gelu<M: MulAdd>(x: f32) -> f32 {
    (0.5 * x) * erfc::<M>(-x * std::f32::consts::FRAC_1_SQRT_2)
}

/// `erfc(a)` for `a >= 0.5`, where `1 - erf(a)` cancels and Cephes' `erfcf` with our `exp`
/// errs by 5 ulp: Sun's `s_erff.c` forms (FreeBSD's coefficients), each a rational
/// function, evaluated for every lane and selected, so that the loop stays vectorised
/// (two divisions: `1/a`, and one ratio for whichever form the lane takes).
/// - [0.5, 0.84375): `0.5 - (a - 0.5 + a * P(a^2) / Q(a^2))`;
/// - [0.84375, 1.25): `(1 - erx) - P(a - 1) / Q(a - 1)`;
/// - past 1.25: `exp(-h^2 - 0.5625) * exp((h - a)(h + a) + R(1/a^2) / S(1/a^2)) / a`, with
///   `h` the high 11 bits of `a`, so that `h^2` is exact; one `R / S` to 1/0.35, another
///   past it; 0 past [`ERFC_ZERO`].
///
/// Forms that share an evaluation take their coefficients per lane.
#[inline(always)]
fn erfc_sun<M: MulAdd>(a: f32) -> f32 {
    const ERX: f32 = 8.450_629_115e-1;
    // Near 0.5: numerator and denominator in a^2, padded to the degree of those near 1.
    const SMALL_P: [f32; 7] = [
        0.0,
        0.0,
        -2.376_301_745_2e-5,
        -5.770_270_247e-3,
        -2.848_174_981_8e-2,
        -3.250_420_987_6e-1,
        1.283_791_661_3e-1,
    ];
    const SMALL_Q: [f32; 7] = [
        0.0,
        -3.960_228_241_3e-6,
        1.324_947_370_4e-4,
        5.081_306_211_7e-3,
        6.502_225_25e-2,
        3.979_172_110_6e-1,
        1.0,
    ];
    // Near 1: in a - 1.
    const ONE_P: [f32; 7] = [
        -2.166_375_517_8e-3,
        3.547_830_507_2e-2,
        -1.108_946_949_2e-1,
        3.183_466_196_1e-1,
        -3.722_078_800_2e-1,
        4.148_561_060_4e-1,
        -2.362_118_568_3e-3,
    ];
    const ONE_Q: [f32; 7] = [
        1.198_450_010_3e-2,
        1.363_708_358_3e-2,
        1.261_712_163_7e-1,
        7.182_865_589_9e-2,
        5.403_979_420_7e-1,
        1.064_208_820_5e-1,
        1.0,
    ];
    // Past 1.25: in 1/a^2.
    const TAIL_R: [f32; 8] = [
        -9.814_329_147_3,
        -8.128_743_743_9e1,
        -1.846_050_872_8e2,
        -1.623_966_674_8e2,
        -6.237_533_187_9e1,
        -1.055_862_617_5e1,
        -6.938_585_639e-1,
        -9.864_944_033_3e-3,
    ];
    // Past 1/0.35, padded to the degree of those before it.
    const FAR_R: [f32; 8] = [
        0.0,
        -4.835_191_955_6e2,
        -1.025_095_092_8e3,
        -6.375_664_672_9e2,
        -1.606_363_830_6e2,
        -1.775_795_555_1e1,
        -7.992_832_660_7e-1,
        -9.864_943_102e-3,
    ];
    const FAR_S: [f32; 9] = [
        0.0,
        -2.244_095_230_1e1,
        4.745_285_339_4e2,
        2.553_050_293e3,
        3.199_858_154_3e3,
        1.536_729_614_3e3,
        3.257_925_109_9e2,
        3.033_806_037_9e1,
        1.0,
    ];
    const TAIL_S: [f32; 9] = [
        -6.042_441_353_2e-2,
        6.570_249_557_5,
        1.086_350_021_4e2,
        4.290_081_481_9e2,
        6.453_872_680_7e2,
        4.345_658_874_5e2,
        1.376_577_606_2e2,
        1.965_127_182e1,
        1.0,
    ];
    /// Numerator and denominator (Horner's rule), each coefficient chosen by `first`.
    #[inline(always)]
    fn rational<M: MulAdd, const N: usize, const D: usize>(
        first: bool,
        t: f32,
        [num, other_num]: [&[f32; N]; 2],
        [den, other_den]: [&[f32; D]; 2],
    ) -> (f32, f32) {
        let pick = |one: f32, other: f32| if first { one } else { other };
        let p = (0..N).fold(0.0, |p, i| M::mul_add(p, t, pick(num[i], other_num[i])));
        let q = (0..D).fold(0.0, |q, i| M::mul_add(q, t, pick(den[i], other_den[i])));
        (p, q)
    }
    let zero = a > ERFC_ZERO;
    // Computed at 1 where the result is 0: subnormal intermediates are slow to compute.
    let a = if zero { 1.0 } else { a };
    let near_half = a < 0.843_75;
    let t = if near_half { a * a } else { a - 1.0 };
    let head = rational::<M, 7, 7>(near_half, t, [&SMALL_P, &ONE_P], [&SMALL_Q, &ONE_Q]);
    let inverse = 1.0 / a;
    let w = inverse * inverse;
    let tail = rational::<M, 8, 9>(a < 1.0 / 0.35, w, [&TAIL_R, &FAR_R], [&TAIL_S, &FAR_S]);
    // One division serves both forms: the head's ratio or the tail's correction.
    let in_tail = a >= 1.25;
    let ratio = if in_tail { tail.0 } else { head.0 } / if in_tail { tail.1 } else { head.1 };
    let head = if near_half {
        0.5 - M::mul_add(a, ratio, a - 0.5)
    } else {
        (1.0 - ERX) - ratio
    };
    let h = f32::from_bits(a.to_bits() & 0xffff_e000);
    let tail =
        exp::<M>(-h * h - 0.5625) * exp_small::<M>(M::mul_add(h - a, h + a, ratio)) * inverse;
    if zero {
        0.0
    } else if in_tail {
        tail
    } else {
        head
    }
}

/// `exp(z)` for `|z| <= 0.25` (the tail of `erfc` needs [-0.22, -0.01]): Taylor's degree 6,
/// within 5e-9 of it there, without the range reduction.
#[inline(always)]
fn exp_small<M: MulAdd>(z: f32) -> f32 {
    let mut p = 1.0 / 720.0;
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = M::mul_add(p, z, c);
    }
    p
}

/// The largest |x| the fast sin and cos handle.
const TRIG_LIMIT: f32 = 8192.0;

/// What a pass of [`run_with`] computes: a unary op, or swish (`x * sigmoid(beta * x)`,
/// the session's fusion of Keras's three ops).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kernel {
    Unary(UnaryOp),
    Swish {
        beta: f32,
    },
    /// The exact GELU, `(0.5 * x) * erfc(-x * (1/√2))`, rounded as Keras's five ops are.
    Gelu,
}

#[inline(always)]
fn apply<M: MulAdd>(kernel: Kernel, src: &[f32], dst: &mut [f32]) -> bool {
    macro_rules! each {
        ($f:expr) => {
            dst.iter_mut().zip(src).for_each(|(o, &x)| *o = $f(x))
        };
    }
    // For the large kernels, a `for` loop: its body stays in this function and takes its
    // target features (the iterator's `fold` was outlined without them, and `mul_add` then
    // called software `fmaf`, 50x slower). The small ones keep `for_each`, which cos
    // measured 1.25x faster with.
    macro_rules! each_inline {
        ($f:expr) => {
            for (o, &x) in dst.iter_mut().zip(src) {
                *o = $f(x);
            }
        };
    }
    let op = match kernel {
        Kernel::Unary(op) => op,
        Kernel::Swish { beta } => {
            each_inline!(|x: f32| x * sigmoid::<M>(beta * x));
            return true;
        }
        Kernel::Gelu => {
            // A function, not a closure: a closure this large is outlined without the
            // target features (and calls software `fmaf`).
            each_inline!(gelu::<M>);
            return true;
        }
    };
    match op {
        // NaN stays; -0 becomes +0.
        UnaryOp::Relu => each!(|x: f32| if x > 0.0 || x.is_nan() { x } else { 0.0 }),
        // `clamp` keeps NaN and -0 (they compare false both ways), as TensorFlow.
        UnaryOp::Relu6 => each!(|x: f32| x.clamp(0.0, 6.0)),
        UnaryOp::Exp => each!(exp::<M>),
        UnaryOp::Log => each!(log::<M>),
        UnaryOp::Tanh => each!(tanh::<M>),
        UnaryOp::Sigmoid => each!(sigmoid::<M>),
        UnaryOp::Erf => each_inline!(erf::<M>),
        UnaryOp::Erfc => each_inline!(erfc::<M>),
        UnaryOp::Sin | UnaryOp::Cos => {
            if op == UnaryOp::Sin {
                each!(sin_cos::<M, false>);
            } else {
                each!(sin_cos::<M, true>);
            }
            for (o, &x) in dst.iter_mut().zip(src) {
                // One comparison that is false for NaN keeps this scan branch-light (the
                // `is_nan() || ...` form measured 5x slower for the whole op).
                #[allow(clippy::neg_cmp_op_on_partial_ord)]
                if !(x.abs() <= TRIG_LIMIT) {
                    *o = if op == UnaryOp::Sin { x.sin() } else { x.cos() };
                }
            }
        }
        _ => return false,
    }
    true
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")]
unsafe fn apply_avx512(kernel: Kernel, src: &[f32], dst: &mut [f32]) -> bool {
    apply::<Fused>(kernel, src, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn apply_avx2(kernel: Kernel, src: &[f32], dst: &mut [f32]) -> bool {
    apply::<Fused>(kernel, src, dst)
}

/// Which instruction set the kernels run with on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Avx2,
    Baseline,
}

/// The best instruction set this CPU has for the kernels.
pub(crate) fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            return Isa::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// `dst = kernel(src)` elementwise, vectorised for `isa` (which must be one this CPU has);
/// `false` if a unary op has no vectorised kernel.
pub(crate) fn run_with(isa: Isa, kernel: Kernel, src: &[f32], dst: &mut [f32]) -> bool {
    assert_eq!(src.len(), dst.len());
    match isa {
        // SAFETY: `isa` came from `detected()` (or a test that checked it), so the CPU has
        // the features the function was compiled for.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { apply_avx512(kernel, src, dst) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { apply_avx2(kernel, src, dst) },
        _ => apply::<Separate>(kernel, src, dst),
    }
}

/// A loop to compile for the widest vectors the CPU has ([`widest`]). Implementations mark
/// [`Vectorised::run`] `#[inline(always)]`, so that it is compiled into each of
/// [`widest`]'s wrappers with their features (a closure would be called, compiled for
/// the baseline).
pub(crate) trait Vectorised {
    /// What the loop returns.
    type Output;
    /// Run the loop.
    fn run(self) -> Self::Output;
}

/// `kernel.run()` compiled for the widest vectors this CPU has: AVX-512, AVX2 or the
/// baseline. The compiler vectorises with the wrappers' features but never contracts a
/// product and a sum into an FMA on its own, so the results are the baseline's bits.
#[inline(always)]
pub(crate) fn widest<K: Vectorised>(kernel: K) -> K::Output {
    // SAFETY: `isa()` is this CPU's.
    unsafe { compiled_for(isa(), kernel) }
}

/// `kernel.run()` compiled for `isa` (tests compare each set's results).
///
/// # Safety
///
/// The CPU must have `isa`'s features.
#[inline(always)]
pub(crate) unsafe fn compiled_for<K: Vectorised>(isa: Isa, kernel: K) -> K::Output {
    match isa {
        // SAFETY: the caller's CPU has the features each wrapper is compiled for.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { widest_avx512(kernel) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { widest_avx2(kernel) },
        _ => kernel.run(),
    }
}

/// [`widest`]'s AVX-512 wrapper.
///
/// # Safety
///
/// The CPU must have AVX-512 (F, DQ, VL, BW), AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")]
unsafe fn widest_avx512<K: Vectorised>(kernel: K) -> K::Output {
    kernel.run()
}

/// [`widest`]'s AVX2 wrapper.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn widest_avx2<K: Vectorised>(kernel: K) -> K::Output {
    kernel.run()
}

/// Whether [`widest`] compiles with fused multiply-adds: every wrapper but the baseline's
/// has FMA. Kernels ask for `mul_add` only then (the baseline's is a call into software).
pub(crate) fn widest_fuses() -> bool {
    isa() != Isa::Baseline
}

/// This CPU's best instruction set for the kernels, detected once.
pub(crate) fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(detected)
}

/// `dst = op(src)` with the best kernel for this CPU; `false` if `op` has none.
pub(crate) fn unary_f32(op: UnaryOp, src: &[f32], dst: &mut [f32]) -> bool {
    run_with(isa(), Kernel::Unary(op), src, dst)
}

/// `dst = src * sigmoid(beta * src)` (swish) in one pass, with the sigmoid above (within 4
/// ulp) and the best instruction set this CPU has.
pub(crate) fn swish_f32(beta: f32, src: &[f32], dst: &mut [f32]) {
    run_with(isa(), Kernel::Swish { beta }, src, dst);
}

/// `dst = (0.5 * src) * erfc(-src * (1/√2))` (the exact GELU) in one pass, with the erfc
/// above (within 4 ulp) and the best instruction set this CPU has.
pub(crate) fn gelu_f32(src: &[f32], dst: &mut [f32]) {
    run_with(isa(), Kernel::Gelu, src, dst);
}

/// TensorFlow's `Softmax` (`log`: `LogSoftmax`) of each `width`-element row of `src` into
/// `dst`, each row while it is in cache: its maximum and sum in vector lanes, then
/// `exp(x - max) / sum` (the exponentials scaled by the sum's inverse, as TensorFlow's
/// Eigen kernel does) or `x - max - log(sum)`; the best instruction set this CPU has,
/// chosen once for all the rows.
pub(crate) fn softmax_rows_f32(width: usize, log: bool, src: &[f32], dst: &mut [f32]) {
    assert!(width > 0 && src.len() == dst.len() && src.len().is_multiple_of(width));
    match isa() {
        // SAFETY: `isa()` detected these features on this CPU.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { softmax_avx512(width, log, src, dst) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { softmax_avx2(width, log, src, dst) },
        _ => softmax_rows::<Separate>(width, log, src, dst),
    }
}

#[inline(always)]
fn softmax_rows<M: MulAdd>(width: usize, log: bool, src: &[f32], dst: &mut [f32]) {
    use crate::kernels::reduce_fast::{max_run, sum_run};
    for (x, out) in src.chunks_exact(width).zip(dst.chunks_exact_mut(width)) {
        let max = max_run(x);
        for (o, &v) in out.iter_mut().zip(x) {
            *o = exp::<M>(v - max);
        }
        let sum = sum_run(out) as f32;
        if log {
            // `x - max - log(sum)`, the shift subtracted first as TensorFlow does.
            let log_sum = sum.ln();
            for (o, &v) in out.iter_mut().zip(x) {
                *o = (v - max) - log_sum;
            }
        } else {
            let inverse = 1.0 / sum;
            for o in out.iter_mut() {
                *o *= inverse;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")]
unsafe fn softmax_avx512(width: usize, log: bool, src: &[f32], dst: &mut [f32]) {
    softmax_rows::<Fused>(width, log, src, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_avx2(width: usize, log: bool, src: &[f32], dst: &mut [f32]) {
    softmax_rows::<Fused>(width, log, src, dst)
}

/// Whether `op` has a vectorised f32 kernel.
pub(crate) fn has_kernel(op: UnaryOp) -> bool {
    KERNEL_OPS.contains(&op)
}

/// The ops with vectorised f32 kernels.
pub(crate) const KERNEL_OPS: [UnaryOp; 10] = [
    UnaryOp::Relu,
    UnaryOp::Relu6,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Erf,
    UnaryOp::Erfc,
    UnaryOp::Sin,
    UnaryOp::Cos,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in ulps between two finite f32 of the same sign class (NaN/inf must match).
    fn ulps(a: f32, b: f32) -> u32 {
        if a.is_nan() || b.is_nan() {
            return if a.is_nan() && b.is_nan() {
                0
            } else {
                u32::MAX
            };
        }
        if a == b {
            return 0;
        }
        let key = |v: f32| {
            let bits = v.to_bits() as i32;
            if bits < 0 {
                i32::MIN - bits
            } else {
                bits
            }
        };
        (key(a) as i64 - key(b) as i64).unsigned_abs() as u32
    }

    fn inputs() -> Vec<f32> {
        let mut v: Vec<f32> = (-2000..=2000).map(|i| i as f32 * 0.011).collect();
        // Densely where erf and erfc change form.
        v.extend((-30_000..=30_000).map(|i| i as f32 * 1e-4));
        v.extend(
            (-300..300).map(|i| (i as f32 * 0.31).exp2() * if i % 2 == 0 { 1.0 } else { -1.0 }),
        );
        v.extend([
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            1e-40,
            -1e-40,
            88.7,
            88.73,
            -103.0,
            -110.0,
            8191.0,
            9000.0,
            1e30,
        ]);
        v.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MAX,
            -f32::MAX,
            std::f32::consts::PI,
            std::f32::consts::FRAC_PI_2,
        ]);
        v
    }

    fn reference(op: UnaryOp, x: f32) -> f32 {
        let x = f64::from(x);
        (match op {
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Erf => libm::erf(x),
            UnaryOp::Erfc => libm::erfc(x),
            UnaryOp::Sin => x.sin(),
            // NaN stays NaN (f64::max and clamp would drop or keep it inconsistently).
            UnaryOp::Relu if x.is_nan() => x,
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::Relu6 if x.is_nan() => x,
            UnaryOp::Relu6 => x.clamp(0.0, 6.0),
            _ => x.cos(),
        }) as f32
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "an accuracy test against f64 libm, whose precision Miri varies on purpose"
    )]
    fn every_isa_within_the_ulp_bounds() {
        let isas: Vec<Isa> = [Isa::Baseline, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|&isa| {
                isa == Isa::Baseline
                    || detected() == isa
                    || (isa == Isa::Avx2 && detected() == Isa::Avx512)
            })
            .collect();
        let x = inputs();
        for isa in isas {
            for op in KERNEL_OPS {
                let mut out = vec![0f32; x.len()];
                assert!(run_with(isa, Kernel::Unary(op), &x, &mut out));
                let bound = match op {
                    UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erfc => 4,
                    UnaryOp::Erf if isa == Isa::Baseline => 3,
                    _ => 2,
                };
                for (&xi, &got) in x.iter().zip(&out) {
                    let want = reference(op, xi);
                    // Results below the normal range are compared absolutely (ulps there are tiny).
                    let tiny =
                        want.abs() < f32::MIN_POSITIVE && (got - want).abs() <= 2.0 * 1.4e-45;
                    assert!(
                        tiny || ulps(got, want) <= bound,
                        "{op} {isa:?} at {xi:e}: got {got:e}, want {want:e}"
                    );
                }
            }
        }
    }
}

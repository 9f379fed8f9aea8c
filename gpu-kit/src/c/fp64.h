// Helpers of programs that compute in f64.

// x rounded to f32 toward zero, with the last bit set if that was inexact (round to odd):
// rounding this once more to f16 or bf16 rounds x correctly, once.
FN f32 f64_to_f32_odd(f64 x) {
    if (x != x) {
        return (f32)x;
    }
    f32 r = (f32)x;
    if (fabs_f64((f64)r) > fabs_f64(x)) {
        r = F32_FROM_BITS(F32_BITS(r) - 1u);
    }
    if ((f64)r != x) {
        r = F32_FROM_BITS(F32_BITS(r) | 1u);
    }
    return r;
}

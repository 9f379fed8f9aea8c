// x rounded to f32 toward zero, with the last bit set if that was inexact (round to odd):
// rounding this once more to a narrower float rounds x correctly.
fn f64_to_f32_odd(x: f64) -> f32 {
    var r = f32(x);
    if (is_nan(x) || abs(f64(r)) <= abs(x)) {
        if (f64(r) != x && !is_nan(x)) {
            r = bitcast<f32>(bitcast<u32>(r) | 1u);
        }
        return r;
    }
    r = bitcast<f32>(bitcast<u32>(r) - 1u);
    return bitcast<f32>(bitcast<u32>(r) | 1u);
}

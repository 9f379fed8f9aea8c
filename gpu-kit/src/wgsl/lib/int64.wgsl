fn int64_to_float(m: u64, negative: bool, p: u32) -> f32 {
    let high = u32(m >> 32u);
    if (high == 0u) {
        return int_to_float(u32(m), negative, p);
    }
    let shift = 32u - countLeadingZeros(high);
    let cut = u32(m >> shift) | select(0u, 1u, (m & ((1lu << shift) - 1lu)) != 0lu);
    return int_to_float(cut, negative, p) * pow2(i32(shift));
}

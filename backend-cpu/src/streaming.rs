//! Non-temporal (streaming) stores for outputs larger than the caches: the result goes
//! straight to memory instead of being read into the cache first (a normal store to a line
//! not in cache reads it from memory: a 50% traffic overhead on `out = a + b`, which is what
//! holds a freshly computed result below copy bandwidth).

use polytensor_core::Element;

/// Outputs of at least this many bytes are written with streaming stores: larger than this
/// machine class's last-level cache share, so the result would not stay cached anyway.
pub(crate) const STREAMING_MIN_BYTES: usize = 32 << 20;

/// Whether an output of `len` elements of `O` should be streamed.
pub(crate) fn worth_streaming<O>(len: usize) -> bool {
    cfg!(target_arch = "x86_64") && len * std::mem::size_of::<O>() >= STREAMING_MIN_BYTES
}

/// The granule of the streamed middle of an output, in elements: a tile row (64) streams.
const BLOCK: usize = 64;

/// The most elements computed by one call of `fill` before they are streamed out: few
/// enough to stay in L1, enough that the call (to a kernel's `&dyn` loop) costs nothing.
const CHUNK: usize = 4 * BLOCK;

/// Fill `out` by `fill(block, first)`, which computes the values of
/// `out[first..first + block.len()]` into `block`: in place for the unaligned head and the
/// tail, through a stack buffer and streaming stores for the 64-byte aligned middle. The
/// caller calls [`fence`] once its work item is done.
pub(crate) fn fill_streaming<O: Element>(out: &mut [O], fill: impl Fn(&mut [O], usize)) {
    let size = std::mem::size_of::<O>();
    let misalignment = out.as_ptr() as usize % 64;
    if size == 0 || !misalignment.is_multiple_of(size) {
        fill(out, 0);
        return;
    }
    let head = ((64 - misalignment) % 64 / size).min(out.len());
    let body = (out.len() - head) / BLOCK * BLOCK;
    fill(&mut out[..head], 0);
    if body <= BLOCK {
        // A tile row: a small buffer (making the large one would cost more than the row).
        stream_through(
            &mut [O::default(); BLOCK],
            &mut out[..head + body],
            head,
            &fill,
        );
    } else {
        stream_through(
            &mut [O::default(); CHUNK],
            &mut out[..head + body],
            head,
            &fill,
        );
    }
    fill(&mut out[head + body..], head + body);
}

/// Compute `out[from..]` (a whole number of 64-byte lines) into `buffer`, a piece at a
/// time, and stream each piece out.
fn stream_through<O: Element>(
    buffer: &mut [O],
    out: &mut [O],
    from: usize,
    fill: &impl Fn(&mut [O], usize),
) {
    for first in (from..out.len()).step_by(buffer.len()) {
        let n = buffer.len().min(out.len() - first);
        fill(&mut buffer[..n], first);
        stream(&buffer[..n], &mut out[first..first + n]);
    }
}

/// `fill(out, 0)`, through [`fill_streaming`] when `streaming`.
pub(crate) fn fill_output<O: Element>(
    out: &mut [O],
    streaming: bool,
    fill: impl Fn(&mut [O], usize),
) {
    if streaming {
        fill_streaming(out, fill);
    } else {
        fill(out, 0);
    }
}

/// Copy `src` to `dst` (equal lengths, `dst` 16-byte aligned, a multiple of 16 bytes) with
/// non-temporal stores.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn stream<O: Element>(src: &[O], dst: &mut [O]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let bytes = std::mem::size_of_val(src);
    debug_assert!(
        src.len() == dst.len()
            && bytes.is_multiple_of(16)
            && (dst.as_ptr() as usize).is_multiple_of(16)
    );
    let (from, to) = (src.as_ptr().cast::<u8>(), dst.as_mut_ptr().cast::<u8>());
    for offset in (0..bytes).step_by(16) {
        // SAFETY: SSE2 is part of x86_64. `offset + 16 <= bytes` for both slices (equal
        // byte lengths, a multiple of 16); the load is unaligned-tolerant and the store
        // target is 16-byte aligned (the caller aligned `dst` to 64 bytes). Any bytes are a
        // valid `__m128i`.
        unsafe {
            let v = _mm_loadu_si128(from.add(offset).cast::<__m128i>());
            _mm_stream_si128(to.add(offset).cast::<__m128i>(), v);
        }
    }
}

/// Copy `src` to `dst` with plain stores (other targets, and Miri, which cannot run the
/// `movntdq` that `_mm_stream_si128` is written in: it checks the blocking around it).
#[cfg(not(all(target_arch = "x86_64", not(miri))))]
fn stream<O: Element>(src: &[O], dst: &mut [O]) {
    dst.copy_from_slice(src);
}

/// Order this thread's streaming stores before whatever follows (they are weakly ordered):
/// call it at the end of every work item that streamed. (Miri, which cannot run `sfence`,
/// orders every store anyway.)
pub(crate) fn fence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: SSE is part of x86_64; a store fence has no other effect.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alignment_and_length_is_filled_exactly() {
        // Every alignment; under Miri, which runs this a thousand times slower, fewer lengths.
        let lengths: &[usize] = if cfg!(miri) {
            &[0, 1, 16, 65, 129]
        } else {
            &[0, 1, 15, 16, 63, 64, 65, 129, 1000, 4096]
        };
        let mut storage = vec![0f32; 4096 + 64];
        let storage = &mut storage[..lengths[lengths.len() - 1] + 17];
        for offset in 0..17 {
            for &len in lengths {
                storage.fill(-1.0);
                let out = &mut storage[offset..offset + len];
                fill_streaming(out, |block, first| {
                    for (i, v) in block.iter_mut().enumerate() {
                        *v = (first + i) as f32;
                    }
                });
                fence();
                for (i, &v) in storage.iter().enumerate() {
                    let inside = (offset..offset + len).contains(&i);
                    let want = if inside { (i - offset) as f32 } else { -1.0 };
                    assert_eq!(v, want, "offset {offset}, len {len}, index {i}");
                }
            }
        }
    }

    #[test]
    fn threshold_is_in_bytes() {
        assert!(!worth_streaming::<f32>((STREAMING_MIN_BYTES / 4) - 1));
        assert_eq!(
            worth_streaming::<f64>(STREAMING_MIN_BYTES / 8),
            cfg!(target_arch = "x86_64")
        );
    }
}

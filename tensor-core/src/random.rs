//! Seeded random tensors with TensorFlow's generator: Philox4x32-10 (Salmon et al., 2011), a
//! counter-based generator, so a value depends only on the seeds and its position, never on
//! the device or the thread that made it. The streams and their conversions to floats are
//! TensorFlow's (`RandomUniform`, `RandomStandardNormal`, `TruncatedNormal` with `seed` and
//! `seed2`), so a seeded initializer gives TensorFlow's values: uniform values bit for bit;
//! normal values within an ulp or two (they go through `log`, `sqrt`, `sin` and `cos`).
//!
//! Values are made on the host and copied to the device: the generator is cheap next to
//! the copy, and the host makes them identically for every backend.

use std::sync::Arc;

use half::{bf16, f16};

use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::IntoShape;
use crate::tensor::Tensor;

/// The Philox4x32-10 generator: a 128-bit counter and a 64-bit key; each call gives four
/// 32-bit words and advances the counter by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Philox {
    counter: [u32; 4],
    key: [u32; 2],
}

/// Calls TensorFlow reserves per output element of a stateful random op, so that the next
/// run of the op starts on fresh counters.
pub const CALLS_PER_OUTPUT: u64 = 256;

impl Philox {
    const M0: u32 = 0xD251_1F53;
    const M1: u32 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;

    /// The generator TensorFlow's stateful random ops start from for `seed` and `seed2`:
    /// `seed` is the key, `seed2` the counter's upper half.
    pub fn new(seed: u64, seed2: u64) -> Self {
        Self {
            counter: [0, 0, seed2 as u32, (seed2 >> 32) as u32],
            key: [seed as u32, (seed >> 32) as u32],
        }
    }

    /// Skip `count` calls (TensorFlow's `Skip`, with its carry rule).
    pub fn skip(&mut self, count: u64) {
        let lo = count as u32;
        let mut hi = (count >> 32) as u32;
        self.counter[0] = self.counter[0].wrapping_add(lo);
        if self.counter[0] < lo {
            hi = hi.wrapping_add(1);
        }
        self.counter[1] = self.counter[1].wrapping_add(hi);
        if self.counter[1] < hi {
            self.counter[2] = self.counter[2].wrapping_add(1);
            if self.counter[2] == 0 {
                self.counter[3] = self.counter[3].wrapping_add(1);
            }
        }
    }

    /// The next four words.
    pub fn next_block(&mut self) -> [u32; 4] {
        let mut counter = self.counter;
        let mut key = self.key;
        for round in 0..10 {
            if round > 0 {
                key = [key[0].wrapping_add(Self::W0), key[1].wrapping_add(Self::W1)];
            }
            let p0 = u64::from(Self::M0) * u64::from(counter[0]);
            let p1 = u64::from(Self::M1) * u64::from(counter[2]);
            counter = [
                (p1 >> 32) as u32 ^ counter[1] ^ key[0],
                p1 as u32,
                (p0 >> 32) as u32 ^ counter[3] ^ key[1],
                p0 as u32,
            ];
        }
        self.skip(1);
        counter
    }
}

/// A float in `[0, 1)` from the low 23 bits of `x` (TensorFlow's `Uint32ToFloat`).
fn unit_f32(x: u32) -> f32 {
    f32::from_bits((127 << 23) | (x & 0x7f_ffff)) - 1.0
}

/// A double in `[0, 1)` from 52 bits of `hi` and `lo` (TensorFlow's `Uint64ToDouble`).
fn unit_f64(hi: u32, lo: u32) -> f64 {
    let mantissa = (u64::from(hi & 0xf_ffff) << 32) | u64::from(lo);
    f64::from_bits((1023 << 52) | mantissa) - 1.0
}

/// Two standard normal floats from two words (TensorFlow's `BoxMullerFloat`).
fn box_muller_f32(x0: u32, x1: u32) -> [f32; 2] {
    let u1 = unit_f32(x0).max(1.0e-7);
    let v1 = (2.0 * std::f64::consts::PI * f64::from(unit_f32(x1))) as f32;
    let u2 = (-2.0 * f64::from(u1).ln()).sqrt() as f32;
    [v1.sin() * u2, v1.cos() * u2]
}

/// Two standard normal doubles from four words (TensorFlow's `BoxMullerDouble`).
fn box_muller_f64(x: [u32; 4]) -> [f64; 2] {
    let u1 = unit_f64(x[0], x[1]).max(1.0e-7);
    let v1 = 2.0 * std::f64::consts::PI * unit_f64(x[2], x[3]);
    let u2 = (-2.0 * u1.ln()).sqrt();
    [v1.sin() * u2, v1.cos() * u2]
}

/// What a random op draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Uniform in `[0, 1)` (`RandomUniform`).
    Uniform,
    /// Standard normal (`RandomStandardNormal`).
    Normal,
    /// Standard normal redrawn outside `(-2, 2)` (`TruncatedNormal`).
    TruncatedNormal,
}

/// Calls each truncated normal output may use before the next group's counters (256
/// words).
const TRUNCATED_CALLS_PER_OUTPUT: u64 = 64;

/// `count` values of `distribution` in `dtype` (half, bfloat16, float or double), as
/// little-endian bytes, drawn from `generator` the way TensorFlow's CPU kernels draw them.
pub fn sample_bytes(
    distribution: Distribution,
    dtype: DataType,
    count: usize,
    generator: Philox,
) -> Result<Vec<u8>> {
    let len = count
        .checked_mul(dtype.size())
        .ok_or_else(|| Error::invalid(format!("{count} random values overflow")))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| Error::OutOfMemory {
            requested: len,
            device: "the host (random values)".into(),
            stats: Default::default(),
        })?;
    let mut gen = generator;
    match (distribution, dtype) {
        (Distribution::Uniform, DataType::Float) => {
            for_each_block(&mut gen, count, 4, |block, take| {
                for &x in &block[..take] {
                    bytes.extend_from_slice(&unit_f32(x).to_le_bytes());
                }
            });
        }
        (Distribution::Uniform, DataType::Half) => {
            for_each_block(&mut gen, count, 4, |block, take| {
                for &x in &block[..take] {
                    let one_to_two = f16::from_bits((15 << 10) | (x as u16 & 0x3ff));
                    bytes.extend_from_slice(&(one_to_two - f16::ONE).to_le_bytes());
                }
            });
        }
        (Distribution::Uniform, DataType::BFloat16) => {
            for_each_block(&mut gen, count, 4, |block, take| {
                for &x in &block[..take] {
                    let one_to_two = bf16::from_bits((127 << 7) | (x as u16 & 0x7f));
                    bytes.extend_from_slice(&(one_to_two - bf16::ONE).to_le_bytes());
                }
            });
        }
        (Distribution::Uniform, DataType::Double) => {
            for_each_block(&mut gen, count, 2, |block, take| {
                for pair in block.chunks(2).take(take) {
                    bytes.extend_from_slice(&unit_f64(pair[0], pair[1]).to_le_bytes());
                }
            });
        }
        (Distribution::Normal, DataType::Double) => {
            for_each_block(&mut gen, count, 2, |block, take| {
                for v in &box_muller_f64(block)[..take] {
                    bytes.extend_from_slice(&v.to_le_bytes());
                }
            });
        }
        (Distribution::Normal, DataType::Float | DataType::Half | DataType::BFloat16) => {
            for_each_block(&mut gen, count, 4, |block, take| {
                let [a, b] = box_muller_f32(block[0], block[1]);
                let [c, d] = box_muller_f32(block[2], block[3]);
                for v in &[a, b, c, d][..take] {
                    push_narrowed(&mut bytes, dtype, *v);
                }
            });
        }
        (Distribution::TruncatedNormal, DataType::Double) => {
            let draw = |w: &[u32]| box_muller_f64([w[0], w[1], w[2], w[3]]);
            for v in truncated(generator, count, 2, 4, draw) {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        (Distribution::TruncatedNormal, DataType::Float | DataType::Half | DataType::BFloat16) => {
            let draw = |w: &[u32]| box_muller_f32(w[0], w[1]).map(f64::from);
            for v in truncated(generator, count, 4, 2, draw) {
                push_narrowed(&mut bytes, dtype, v as f32);
            }
        }
        (_, other) => {
            return Err(Error::invalid(format!(
                "random values of {other}: TensorFlow's random ops take half, bfloat16, float \
                 and double"
            )))
        }
    }
    Ok(bytes)
}

/// Call `generator` once per group of `per_call` outputs, handing `each` the block and how
/// many of its outputs to keep (fewer for the last group).
fn for_each_block(
    generator: &mut Philox,
    count: usize,
    per_call: usize,
    mut each: impl FnMut([u32; 4], usize),
) {
    let mut left = count;
    while left > 0 {
        let take = left.min(per_call);
        each(generator.next_block(), take);
        left -= take;
    }
}

/// `v` as little-endian bytes of `dtype` (float, or rounded once to half or bfloat16).
fn push_narrowed(bytes: &mut Vec<u8>, dtype: DataType, v: f32) {
    match dtype {
        DataType::Half => bytes.extend_from_slice(&f16::from_f32(v).to_le_bytes()),
        DataType::BFloat16 => bytes.extend_from_slice(&bf16::from_f32(v).to_le_bytes()),
        _ => bytes.extend_from_slice(&v.to_le_bytes()),
    }
}

/// Truncated normal values, as TensorFlow's `TruncatedNormalDistribution`: groups of
/// `group` outputs (4 floats or 2 doubles), each drawn from its own counters (64 calls per
/// output of the group before it), one word at a time, `words` words per normal pair
/// (`draw`), keeping the values inside `(-2, 2)` in order.
fn truncated(
    base: Philox,
    count: usize,
    group: usize,
    words: usize,
    draw: impl Fn(&[u32]) -> [f64; 2],
) -> Vec<f64> {
    let mut values = Vec::with_capacity(count);
    let mut g = 0u64;
    while values.len() < count {
        let mut gen = base;
        gen.skip(g * group as u64 * (TRUNCATED_CALLS_PER_OUTPUT));
        let mut stream = Words {
            gen,
            block: [0; 4],
            used: 4,
        };
        let mut kept = Vec::with_capacity(group);
        while kept.len() < group {
            let taken: Vec<u32> = (0..words).map(|_| stream.next()).collect();
            for v in draw(&taken) {
                if kept.len() < group && v.abs() < 2.0 {
                    kept.push(v);
                }
            }
        }
        let take = (count - values.len()).min(group);
        values.extend_from_slice(&kept[..take]);
        g += 1;
    }
    values
}

/// A generator read one word at a time (TensorFlow's `SingleSampleAdapter`).
struct Words {
    gen: Philox,
    block: [u32; 4],
    used: usize,
}

impl Words {
    fn next(&mut self) -> u32 {
        if self.used == 4 {
            self.block = self.gen.next_block();
            self.used = 0;
        }
        self.used += 1;
        self.block[self.used - 1]
    }
}

impl Tensor {
    /// A tensor of `distribution`'s values in `dtype` from TensorFlow's generator for
    /// `seed` and `seed2`, `offset` calls into its stream (0 for a first run; a stateful op
    /// moves on by [`CALLS_PER_OUTPUT`] per element each run).
    pub fn random(
        shape: impl IntoShape,
        dtype: DataType,
        distribution: Distribution,
        (seed, seed2, offset): (u64, u64, u64),
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        let shape = shape.into_shape()?;
        // The device's memory first: a size it cannot hold is its error, before the host
        // makes the values.
        let mut out = Tensor::zeros(shape.clone(), dtype, device)?;
        let mut generator = Philox::new(seed, seed2);
        generator.skip(offset);
        let bytes = sample_bytes(distribution, dtype, shape.num_elements(), generator)?;
        if !bytes.is_empty() {
            device.copy_from_host(&bytes, &mut out.out_view())?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The known-answer vectors of the Random123 reference for Philox4x32-10.
    #[test]
    fn philox_matches_random123() {
        let mut zero = Philox {
            counter: [0; 4],
            key: [0; 2],
        };
        assert_eq!(
            zero.next_block(),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        let mut ones = Philox {
            counter: [u32::MAX; 4],
            key: [u32::MAX; 2],
        };
        assert_eq!(
            ones.next_block(),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        let mut pi = Philox {
            counter: [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            key: [0xa409_3822, 0x299f_31d0],
        };
        assert_eq!(
            pi.next_block(),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn skipping_moves_the_counter() {
        let mut a = Philox::new(1, 2);
        let mut b = a;
        a.next_block();
        a.next_block();
        b.skip(2);
        assert_eq!(a, b);
    }
}

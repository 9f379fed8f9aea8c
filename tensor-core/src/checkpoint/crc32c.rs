//! CRC-32C (Castagnoli), the checksum of TensorFlow's tensor bundles and of LevelDB's
//! tables, with LevelDB's mask for checksums stored beside the data they cover.
//!
//! [`crc32c`] runs on SSE4.2's `crc32` instruction where the CPU has it (three streams in
//! flight, joined by [`combine`]) and on slicing-by-8 tables elsewhere; [`crc32c_parallel`]
//! splits a large buffer across the thread pool.

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82f6_3b78;

/// LevelDB's mask delta: a checksum stored in the data it covers is masked so that the
/// CRC of a string with embedded CRCs stays well distributed.
const MASK_DELTA: u32 = 0xa282_ead8;

/// Buffers at least this long are split across threads by [`crc32c_parallel`].
const PARALLEL_CHUNK: usize = 4 << 20;

/// LevelDB's and TensorFlow's masked form of a CRC (`crc32c::Mask`).
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The CRC a masked value was made from (`crc32c::Unmask`).
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    extend(0, data)
}

/// The CRC-32C of the bytes `crc` covers followed by `data` (`crc32c::Extend`).
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE4.2, checked just above.
        return unsafe { hardware::extend(crc, data) };
    }
    !software_update(!crc, data)
}

/// The CRC-32C of `data`, computed in chunks on the thread pool and combined: the same
/// value as [`crc32c`].
pub fn crc32c_parallel(data: &[u8]) -> u32 {
    if data.len() < 2 * PARALLEL_CHUNK {
        return crc32c(data);
    }
    use rayon::prelude::*;
    data.par_chunks(PARALLEL_CHUNK)
        .map(|chunk| (crc32c(chunk), chunk.len()))
        .collect::<Vec<_>>()
        .into_iter()
        .fold(0, |crc, (next, len)| combine(crc, next, len as u64))
}

/// The CRC of `A || B` from `crc(A)`, `crc(B)` and `B`'s length (zlib's `crc32_combine`
/// for the Castagnoli polynomial).
pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    multiply_mod_p(x_to_the_8n(len_b), crc_a) ^ crc_b
}

/// `a * b` modulo the polynomial, both in reflected form.
const fn multiply_mod_p(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut product = 0u32;
    loop {
        if a & m != 0 {
            product ^= b;
            if a & (m - 1) == 0 {
                return product;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
}

/// `x^(2^k)` modulo the polynomial for `k` in `0..32`.
const X_TO_THE_2K: [u32; 32] = {
    let mut table = [0u32; 32];
    let mut p = 1u32 << 30; // x^1
    let mut k = 0;
    while k < 32 {
        table[k] = p;
        p = multiply_mod_p(p, p);
        k += 1;
    }
    table
};

/// `x^(8 * n)` modulo the polynomial: the factor that shifts a CRC past `n` zero bytes.
fn x_to_the_8n(mut n: u64) -> u32 {
    let mut p = 1u32 << 31; // x^0
    let mut k = 3; // 8 n = n * 2^3
    while n != 0 {
        if n & 1 != 0 {
            p = multiply_mod_p(X_TO_THE_2K[k & 31], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// Slicing-by-8 tables: `TABLES[0]` is the byte table, `TABLES[k][b]` the CRC of byte `b`
/// followed by `k` zero bytes.
const TABLES: [[u32; 256]; 8] = {
    let mut tables = [[0u32; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let mut crc = b as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][b] = crc;
        b += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut b = 0;
        while b < 256 {
            let prev = tables[k - 1][b];
            tables[k][b] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    tables
};

/// The raw (unconditioned) register after `data`, eight bytes a step.
fn software_update(mut crc: u32, data: &[u8]) -> u32 {
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let lo = crc ^ u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        crc = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][word[4] as usize]
            ^ TABLES[2][word[5] as usize]
            ^ TABLES[1][word[6] as usize]
            ^ TABLES[0][word[7] as usize];
    }
    for &byte in words.remainder() {
        crc = (crc >> 8) ^ TABLES[0][((crc ^ u32::from(byte)) & 0xff) as usize];
    }
    crc
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod hardware {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    /// Below this many bytes one stream is as fast as three.
    const THREE_STREAMS: usize = 3 * 1024;

    /// `extend` on the `crc32` instruction: three independent streams hide its latency
    /// (one result a cycle, three cycles each), then [`super::combine`] joins them.
    ///
    /// # Safety
    ///
    /// The CPU must have SSE4.2.
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn extend(crc: u32, data: &[u8]) -> u32 {
        if data.len() < THREE_STREAMS {
            return !update(!crc, data);
        }
        let third = data.len() / 3 / 8 * 8;
        let (a, rest) = data.split_at(third);
        let (b, c) = rest.split_at(third);
        let (mut ra, mut rb, mut rc) = (!crc, !0u32 as u64, !0u32 as u64);
        let mut ra64 = ra as u64;
        for ((wa, wb), wc) in a
            .chunks_exact(8)
            .zip(b.chunks_exact(8))
            .zip(c.chunks_exact(8))
        {
            ra64 = _mm_crc32_u64(ra64, word(wa));
            rb = _mm_crc32_u64(rb, word(wb));
            rc = _mm_crc32_u64(rc, word(wc));
        }
        ra = ra64 as u32;
        // `c` is longer than a third by the remainder: finish it on its own.
        let rc = update(rc as u32, &c[third..]);
        let crc_ab = super::combine(!ra, !(rb as u32), third as u64);
        super::combine(crc_ab, !rc, c.len() as u64)
    }

    /// The raw register after `data`, one stream.
    #[target_feature(enable = "sse4.2")]
    fn update(crc: u32, data: &[u8]) -> u32 {
        let mut crc64 = crc as u64;
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            crc64 = _mm_crc32_u64(crc64, word(w));
        }
        let mut crc = crc64 as u32;
        for &byte in words.remainder() {
            crc = _mm_crc32_u8(crc, byte);
        }
        crc
    }

    #[inline(always)]
    fn word(bytes: &[u8]) -> u64 {
        u64::from_le_bytes(bytes.try_into().expect("chunks of eight bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // RFC 3720 (iSCSI) test vectors.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46dd_794e);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn mask_round_trips_and_differs() {
        for crc in [0u32, 1, 0xe306_9283, u32::MAX] {
            assert_eq!(unmask(mask(crc)), crc);
            assert_ne!(mask(crc), crc);
        }
    }

    #[test]
    fn every_path_agrees_with_the_tables() {
        let data: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [0, 1, 7, 8, 9, 100, 3071, 3072, 3073, 9000, 20_000] {
            let want = !software_update(!0, &data[..len]);
            assert_eq!(crc32c(&data[..len]), want, "length {len}");
            assert_eq!(extend(crc32c(&data[..len / 2]), &data[len / 2..len]), want);
            let split = len / 3;
            let joined = combine(
                crc32c(&data[..split]),
                crc32c(&data[split..len]),
                (len - split) as u64,
            );
            assert_eq!(joined, want, "combined at {split} of {len}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "eight megabytes of CRC is too slow under Miri")]
    fn parallel_matches_sequential() {
        let data: Vec<u8> = (0..(9 << 20) + 13u32)
            .map(|i| (i ^ (i >> 7)) as u8)
            .collect();
        assert_eq!(crc32c_parallel(&data), !software_update(!0, &data));
    }
}

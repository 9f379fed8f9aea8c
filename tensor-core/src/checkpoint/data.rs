//! The data files' layout: numeric tensors as their little-endian bytes, string tensors as
//! varint lengths, a masked CRC of the lengths, then the bytes; and the reading of one
//! entry's bytes, checksummed on the way.

use std::fs::File;

use crate::error::{Error, Result};

use super::crc32c;
use super::table::{read_varint, write_varint};

/// Reads at least this long are split across the thread pool, each part read and
/// checksummed while it is still in cache.
const PARALLEL_READ: usize = 8 << 20;
/// The part of a parallel read each task takes.
const READ_CHUNK: usize = 2 << 20;

/// `size` bytes of `file` at `offset`, mapped into memory rather than copied, where the
/// platform maps files (`None` elsewhere, and under Miri). The file must hold them.
///
/// The mapping is private and read-only, and populated up front, so that reading it
/// faults no pages. A tensor over it shares the page cache with the file: it is never
/// written (its buffer is read-only: writers copy first), and the checkpoint files polytensor
/// and TensorFlow write are replaced by renaming, never rewritten in place. A file
/// truncated by another process while mapped faults on access, as with every reader that
/// maps files (`safetensors`, candle).
pub(crate) fn map(file: &File, offset: u64, size: usize) -> Option<std::io::Result<bytes::Bytes>> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        Some(mapping::map(file, offset, size))
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = (file, offset, size);
        None
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
mod mapping {
    use std::fs::File;
    use std::os::fd::AsRawFd;

    /// A private read-only mapping, unmapped on drop.
    struct Mapping {
        base: *mut libc::c_void,
        len: usize,
    }

    // SAFETY: the mapping is read-only memory owned by this value until drop; sharing or
    // moving it between threads is as safe as for any immutable byte buffer.
    unsafe impl Send for Mapping {}
    // SAFETY: as above: nothing writes the mapping.
    unsafe impl Sync for Mapping {}

    impl AsRef<[u8]> for Mapping {
        fn as_ref(&self) -> &[u8] {
            // SAFETY: `base` is a live mapping of `len` readable bytes (checked against the
            // file's length when made), unmapped only on drop.
            unsafe { std::slice::from_raw_parts(self.base.cast::<u8>(), self.len) }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: `base` and `len` are exactly what `mmap` returned and was given; no
            // slice of the mapping outlives its owner (`Bytes` keeps the owner alive).
            unsafe { libc::munmap(self.base, self.len) };
        }
    }

    pub(super) fn map(file: &File, offset: u64, size: usize) -> std::io::Result<bytes::Bytes> {
        let file_len = file.metadata()?.len();
        if size == 0
            || offset
                .checked_add(size as u64)
                .is_none_or(|end| end > file_len)
        {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        // SAFETY: `sysconf` has no preconditions.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let start = offset - offset % page;
        let delta = (offset - start) as usize;
        let len = size + delta;
        let file_offset = libc::off_t::try_from(start)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: a new private read-only mapping of an open file's bytes, at a page-aligned
        // offset, of a nonzero length that lies within the file (checked above); it aliases
        // no Rust memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                file_offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(bytes::Bytes::from_owner(Mapping { base, len }).slice(delta..))
    }
}

/// Fill `dst` from `file` at `offset` and return the CRC-32C of what was read.
pub(crate) fn read_checksummed(file: &File, offset: u64, dst: &mut [u8]) -> std::io::Result<u32> {
    if dst.len() < PARALLEL_READ {
        read_exact_at(file, dst, offset)?;
        return Ok(crc32c::crc32c(dst));
    }
    use rayon::prelude::*;
    let parts = dst
        .par_chunks_mut(READ_CHUNK)
        .enumerate()
        .map(|(i, chunk)| {
            read_exact_at(file, chunk, offset + (i * READ_CHUNK) as u64)?;
            Ok((crc32c::crc32c(chunk), chunk.len() as u64))
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(parts
        .into_iter()
        .fold(0, |crc, (next, len)| crc32c::combine(crc, next, len)))
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// The on-disk form of string elements and the CRC-32C TensorFlow stores for them (of the
/// lengths as `uint32` when they fit, else `uint64`; the masked length checksum; then the
/// bytes).
pub(crate) fn encode_strings(strings: &[Vec<u8>]) -> (Vec<u8>, u32) {
    let payload: usize = strings.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(payload + 4 + 2 * strings.len());
    let mut crc = 0;
    for s in strings {
        write_varint(&mut out, s.len() as u64);
        crc = extend_with_length(crc, s.len() as u64);
    }
    let length_checksum = crc32c::mask(crc).to_le_bytes();
    out.extend_from_slice(&length_checksum);
    crc = crc32c::extend(crc, &length_checksum);
    for s in strings {
        out.extend_from_slice(s);
        crc = crc32c::extend(crc, s);
    }
    (out, crc)
}

/// The strings of a string entry's bytes, its checksums checked; `what` names the entry.
pub(crate) fn decode_strings(
    bytes: &[u8],
    count: usize,
    what: &str,
) -> Result<(Vec<Vec<u8>>, u32)> {
    let corrupt = |why: &str| Error::DataLoss(format!("{what}: {why}"));
    let mut at = 0;
    let mut lengths = Vec::with_capacity(count.min(bytes.len()));
    let mut crc = 0;
    for _ in 0..count {
        let len = read_varint(bytes, &mut at).ok_or_else(|| corrupt("truncated string lengths"))?;
        crc = extend_with_length(crc, len);
        lengths.push(len);
    }
    let stored = bytes
        .get(at..at + 4)
        .ok_or_else(|| corrupt("truncated string length checksum"))?;
    if crc32c::unmask(u32::from_le_bytes(stored.try_into().expect("four bytes"))) != crc {
        return Err(corrupt("the checksum of the string lengths does not match"));
    }
    crc = crc32c::extend(crc, stored);
    at += 4;
    let mut strings = Vec::with_capacity(lengths.len());
    for len in lengths {
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| at.checked_add(len))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| corrupt("a string runs past the entry"))?;
        strings.push(bytes[at..end].to_vec());
        crc = crc32c::extend(crc, &bytes[at..end]);
        at = end;
    }
    if at != bytes.len() {
        return Err(corrupt("bytes left over after the strings"));
    }
    Ok((strings, crc))
}

fn extend_with_length(crc: u32, len: u64) -> u32 {
    match u32::try_from(len) {
        Ok(short) => crc32c::extend(crc, &short.to_le_bytes()),
        Err(_) => crc32c::extend(crc, &len.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_and_refuse_corruption() {
        let strings = vec![
            b"".to_vec(),
            b"a\0b".to_vec(),
            vec![0xff, 0xfe],
            vec![7; 300],
        ];
        let (bytes, crc) = encode_strings(&strings);
        assert_eq!(decode_strings(&bytes, 4, "s").unwrap(), (strings, crc));
        for at in 0..bytes.len() {
            let mut broken = bytes.clone();
            broken[at] ^= 1;
            if let Ok((_, got)) = decode_strings(&broken, 4, "s") {
                assert_ne!(got, crc, "a flipped byte at {at} kept the checksum");
            }
        }
        assert!(decode_strings(&bytes[..bytes.len() - 1], 4, "s").is_err());
        assert!(decode_strings(&bytes, 5, "s").is_err());
    }
}

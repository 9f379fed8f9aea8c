//! The index file's container: a LevelDB table (TensorFlow's `table::Table`), sorted keys
//! in uncompressed blocks with restart points, an index block of block handles, and a
//! 48-byte footer. Every block carries a masked CRC-32C, checked on read.

use crate::error::{Error, Result};

use super::crc32c;

/// The footer's last eight bytes (`kTableMagicNumber`).
const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// Two block handles of at most 20 bytes each (padded), then the magic.
const FOOTER_LEN: usize = 48;
/// A block's trailer: the compression type and the masked CRC of the block and that type.
const TRAILER_LEN: usize = 5;
/// TensorFlow writes bundle indexes uncompressed (`kNoCompression`).
const NO_COMPRESSION: u8 = 0;
/// TensorFlow's `table::Options::block_size`.
const BLOCK_SIZE: usize = 256 << 10;
/// Keys between restart points in a data block (`block_restart_interval`).
const RESTART_INTERVAL: usize = 16;

/// A table's keys and values, in key order.
pub(crate) type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Every key and value of the table in `bytes`, in order. `what` names the file in errors.
pub(crate) fn read_table(bytes: &[u8], what: &str) -> Result<Rows> {
    let corrupt = |why: String| Error::DataLoss(format!("{what}: {why}"));
    if bytes.len() < FOOTER_LEN {
        return Err(corrupt(format!(
            "file is too short ({} bytes) to be an sstable",
            bytes.len()
        )));
    }
    let footer = &bytes[bytes.len() - FOOTER_LEN..];
    let magic = u64::from_le_bytes(footer[40..].try_into().expect("eight bytes"));
    if magic != MAGIC {
        return Err(corrupt("not an sstable (bad magic number)".into()));
    }
    let mut at = 0;
    let metaindex = read_handle(footer, &mut at).map_err(&corrupt)?;
    let index = read_handle(footer, &mut at).map_err(&corrupt)?;
    // The metaindex names filter blocks, which bundles do not have: only its checksum
    // matters.
    block_contents(bytes, metaindex).map_err(&corrupt)?;
    let index_block = block_contents(bytes, index).map_err(&corrupt)?;
    let mut entries = Vec::new();
    for (_, handle) in block_entries(index_block).map_err(&corrupt)? {
        let mut at = 0;
        let handle = read_handle(&handle, &mut at).map_err(&corrupt)?;
        let block = block_contents(bytes, handle).map_err(&corrupt)?;
        let block_entries = block_entries(block).map_err(&corrupt)?;
        if let (Some((last, _)), Some((first, _))) = (entries.last(), block_entries.first()) {
            if last >= first {
                return Err(corrupt("keys out of order across blocks".into()));
            }
        }
        entries.extend(block_entries);
    }
    Ok(entries)
}

/// A block handle: offset and size, two varints.
fn read_handle(bytes: &[u8], at: &mut usize) -> Result<(u64, u64), String> {
    let offset = read_varint(bytes, at).ok_or("bad block handle")?;
    let size = read_varint(bytes, at).ok_or("bad block handle")?;
    Ok((offset, size))
}

/// The contents of the block at `handle`, its trailer checked.
fn block_contents(bytes: &[u8], (offset, size): (u64, u64)) -> Result<&[u8], String> {
    let range = usize::try_from(offset)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(o, s)| Some(o..o.checked_add(s)?))
        .filter(|r| {
            r.end
                .checked_add(TRAILER_LEN)
                .is_some_and(|e| e <= bytes.len())
        })
        .ok_or_else(|| format!("block at offset {offset} of {size} bytes lies past the end"))?;
    let (start, end) = (range.start, range.end);
    let kind = bytes[end];
    let stored = u32::from_le_bytes(bytes[end + 1..end + 5].try_into().expect("four bytes"));
    let actual = crc32c::extend(crc32c::crc32c(&bytes[start..end]), &[kind]);
    if crc32c::unmask(stored) != actual {
        return Err(format!(
            "block checksum mismatch in the block at offset {offset}"
        ));
    }
    if kind != NO_COMPRESSION {
        return Err(format!(
            "block at offset {offset} is compressed (type {kind}); TensorFlow's bundles are not"
        ));
    }
    Ok(&bytes[start..end])
}

/// The keys and values of one block, prefix compression undone.
fn block_entries(block: &[u8]) -> Result<Rows, String> {
    let bad = |why: &str| format!("bad block contents: {why}");
    if block.len() < 4 {
        return Err(bad("shorter than its restart count"));
    }
    let restarts = u32::from_le_bytes(block[block.len() - 4..].try_into().expect("four bytes"));
    let data_end = (restarts as usize)
        .checked_mul(4)
        .and_then(|r| block.len().checked_sub(4 + r))
        .ok_or_else(|| bad("restart array past the block"))?;
    let data = &block[..data_end];
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let mut field = || read_varint(data, &mut at).and_then(|v| usize::try_from(v).ok());
        let (shared, unshared, value_len) = match (field(), field(), field()) {
            (Some(s), Some(u), Some(v)) => (s, u, v),
            _ => return Err(bad("truncated entry header")),
        };
        let previous = entries.last().map_or(&[][..], |(k, _)| k.as_slice());
        if shared > previous.len() {
            return Err(bad("entry shares more than the previous key"));
        }
        let key_end = at.checked_add(unshared).filter(|&e| e <= data.len());
        let value_end = key_end
            .and_then(|k| k.checked_add(value_len))
            .filter(|&e| e <= data.len());
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            return Err(bad("entry past the block"));
        };
        let mut key = previous[..shared].to_vec();
        key.extend_from_slice(&data[at..key_end]);
        if entries.last().is_some_and(|(k, _)| *k >= key) {
            return Err(bad("keys out of order"));
        }
        entries.push((key, data[key_end..value_end].to_vec()));
        at = value_end;
    }
    Ok(entries)
}

/// A LEB128 varint of at most ten bytes, or `None` when truncated or too long.
pub(crate) fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return (shift < 63 || byte <= 1).then_some(value);
        }
    }
    None
}

/// Append `value` as a LEB128 varint.
pub(crate) fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A table written in key order, as LevelDB's `TableBuilder` writes it.
pub(crate) struct TableWriter {
    out: Vec<u8>,
    block: BlockWriter,
    index: BlockWriter,
    last_key: Vec<u8>,
    added_any: bool,
    /// The handle of the block just finished, indexed once the next key is known.
    pending: Option<(u64, u64)>,
}

impl TableWriter {
    pub(crate) fn new() -> Self {
        Self {
            out: Vec::new(),
            block: BlockWriter::new(RESTART_INTERVAL),
            index: BlockWriter::new(1),
            last_key: Vec::new(),
            added_any: false,
            pending: None,
        }
    }

    /// Add `key` (greater than every key before it) and its value.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.added_any && key <= self.last_key.as_slice() {
            return Err(Error::invalid(
                "table keys must be added in increasing order",
            ));
        }
        self.added_any = true;
        if let Some(handle) = self.pending.take() {
            let separator = shortest_separator(&self.last_key, key);
            self.index.add(&separator, &encode_handle(handle));
        }
        self.block.add(key, value);
        self.last_key = key.to_vec();
        if self.block.size_estimate() >= BLOCK_SIZE {
            self.pending = Some(self.flush_block());
        }
        Ok(())
    }

    /// The table's bytes.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        if !self.block.is_empty() {
            self.pending = Some(self.flush_block());
        }
        let metaindex = self.write_block(BlockWriter::new(RESTART_INTERVAL).finish());
        if let Some(handle) = self.pending.take() {
            let successor = short_successor(&self.last_key);
            self.index.add(&successor, &encode_handle(handle));
        }
        let index_block = std::mem::replace(&mut self.index, BlockWriter::new(1)).finish();
        let index = self.write_block(index_block);
        let mut footer = encode_handle(metaindex);
        footer.extend_from_slice(&encode_handle(index));
        footer.resize(FOOTER_LEN - 8, 0);
        footer.extend_from_slice(&MAGIC.to_le_bytes());
        self.out.extend_from_slice(&footer);
        self.out
    }

    fn flush_block(&mut self) -> (u64, u64) {
        let block = std::mem::replace(&mut self.block, BlockWriter::new(RESTART_INTERVAL));
        self.write_block(block.finish())
    }

    /// Append a block and its trailer; its handle.
    fn write_block(&mut self, contents: Vec<u8>) -> (u64, u64) {
        let handle = (self.out.len() as u64, contents.len() as u64);
        let crc = crc32c::extend(crc32c::crc32c(&contents), &[NO_COMPRESSION]);
        self.out.extend_from_slice(&contents);
        self.out.push(NO_COMPRESSION);
        self.out.extend_from_slice(&crc32c::mask(crc).to_le_bytes());
        handle
    }
}

fn encode_handle((offset, size): (u64, u64)) -> Vec<u8> {
    let mut out = Vec::with_capacity(20);
    write_varint(&mut out, offset);
    write_varint(&mut out, size);
    out
}

/// The shortest key `k` with `start <= k < limit` that shortens `start` (LevelDB's
/// `FindShortestSeparator`), or `start` itself.
fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common < start.len().min(limit.len()) {
        let byte = start[common];
        if byte < 0xff && byte + 1 < limit[common] {
            let mut separator = start[..=common].to_vec();
            separator[common] += 1;
            return separator;
        }
    }
    start.to_vec()
}

/// A short key at or after `key` (LevelDB's `FindShortSuccessor`).
fn short_successor(key: &[u8]) -> Vec<u8> {
    match key.iter().position(|&b| b != 0xff) {
        Some(i) => {
            let mut successor = key[..=i].to_vec();
            successor[i] += 1;
            successor
        }
        None => key.to_vec(),
    }
}

/// One block: entries sharing a prefix with the one before, and every `interval`-th entry
/// a restart point holding its whole key.
struct BlockWriter {
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
}

impl BlockWriter {
    fn new(interval: usize) -> Self {
        Self {
            buffer: Vec::new(),
            restarts: vec![0],
            interval,
            since_restart: 0,
            last_key: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    fn size_estimate(&self) -> usize {
        self.buffer.len() + 4 * self.restarts.len() + 4
    }

    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.since_restart < self.interval {
            key.iter()
                .zip(&self.last_key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buffer.len() as u32);
            self.since_restart = 0;
            0
        };
        write_varint(&mut self.buffer, shared as u64);
        write_varint(&mut self.buffer, (key.len() - shared) as u64);
        write_varint(&mut self.buffer, value.len() as u64);
        self.buffer.extend_from_slice(&key[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key = key.to_vec();
        self.since_restart += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        for restart in &self.restarts {
            self.buffer.extend_from_slice(&restart.to_le_bytes());
        }
        self.buffer
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.buffer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let mut writer = TableWriter::new();
        for (k, v) in entries {
            writer.add(k, v).unwrap();
        }
        writer.finish()
    }

    #[test]
    #[cfg_attr(miri, ignore = "a megabyte of table is too slow under Miri")]
    fn round_trips_across_many_blocks() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..3000u32)
            .map(|i| (format!("key/{i:06}").into_bytes(), vec![i as u8; 300]))
            .collect();
        let bytes = table(&entries);
        assert!(bytes.len() > 3 * BLOCK_SIZE);
        assert_eq!(read_table(&bytes, "t").unwrap(), entries);
        let empty = table(&[]);
        assert_eq!(read_table(&empty, "t").unwrap(), vec![]);
    }

    #[test]
    fn refuses_corruption_with_a_data_loss() {
        let entries = vec![
            (b"".to_vec(), b"header".to_vec()),
            (b"a".to_vec(), b"v".to_vec()),
        ];
        let bytes = table(&entries);
        // The footer pads its two handles with zeros, which no reader looks at.
        let footer = bytes.len() - FOOTER_LEN;
        let mut handles_end = 0;
        read_handle(&bytes[footer..], &mut handles_end).unwrap();
        read_handle(&bytes[footer..], &mut handles_end).unwrap();
        let padding = footer + handles_end..bytes.len() - 8;
        for at in (0..bytes.len()).filter(|at| !padding.contains(at)) {
            let mut broken = bytes.clone();
            broken[at] ^= 0x40;
            match read_table(&broken, "t") {
                Err(Error::DataLoss(why)) => assert!(why.starts_with("t: "), "{why}"),
                Ok(read) => assert_ne!(read, entries, "a flipped byte at {at} went unnoticed"),
                Err(other) => panic!("{other}"),
            }
        }
        assert!(read_table(&bytes[..40], "t").is_err());
        let mut writer = TableWriter::new();
        writer.add(b"b", b"").unwrap();
        assert!(writer.add(b"a", b"").is_err());
    }

    #[test]
    fn separators_shorten_keys() {
        assert_eq!(shortest_separator(b"abcdef", b"abzz"), b"abd");
        assert_eq!(shortest_separator(b"abc", b"abd"), b"abc");
        assert_eq!(short_successor(b"\xff\xffa"), b"\xff\xffb");
        assert_eq!(read_varint(&[0xff; 11], &mut 0), None);
        let mut out = Vec::new();
        write_varint(&mut out, u64::MAX);
        assert_eq!(read_varint(&out, &mut 0), Some(u64::MAX));
    }
}

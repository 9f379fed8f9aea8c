//! The index key of one saved slice of a partitioned tensor: TensorFlow's
//! `EncodeTensorNameSlice`, in `OrderedCode` so that a tensor's slices sort together and
//! before every plain key.

use crate::slice::{Extent, TensorSlice};

/// `0` (as an ordered number), the name (as an ordered string), the rank, then each
/// extent's start and length (`-1` for a whole dimension) as ordered signed numbers.
pub(crate) fn slice_key(name: &str, slice: &TensorSlice) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 4 + 4 * slice.rank());
    write_num_increasing(&mut key, 0);
    write_string(&mut key, name.as_bytes());
    write_num_increasing(&mut key, slice.rank() as u64);
    for extent in slice.extents() {
        let (start, length) = match *extent {
            Extent::Full => (0, -1),
            Extent::Range { start, length } => (start, length),
        };
        write_signed_num_increasing(&mut key, start);
        write_signed_num_increasing(&mut key, length);
    }
    key
}

/// Whether `key` is a slice key rather than a tensor's name (names never start with NUL).
pub(crate) fn is_slice_key(key: &[u8]) -> bool {
    key.first() == Some(&0)
}

/// Bytes `\0` and `\xff` escaped (`\0\xff`, `\xff\0`), then the separator `\0\x01`.
fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        match b {
            0x00 => out.extend_from_slice(&[0x00, 0xff]),
            0xff => out.extend_from_slice(&[0xff, 0x00]),
            _ => out.push(b),
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// A length byte, then the value big-endian without leading zero bytes.
fn write_num_increasing(out: &mut Vec<u8>, value: u64) {
    let bytes = value.to_be_bytes();
    let skip = (value.leading_zeros() / 8) as usize;
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// A sign bit, as many length bits as bytes follow the first, then the value in two's
/// complement: one byte for `-64..64`, two for `-2^13..2^13`, up to ten.
fn write_signed_num_increasing(out: &mut Vec<u8>, value: i64) {
    // The header bits of the first two bytes, by encoded length.
    const HEADER: [[u8; 2]; 11] = [
        [0, 0],
        [0x80, 0],
        [0xc0, 0],
        [0xe0, 0],
        [0xf0, 0],
        [0xf8, 0],
        [0xfc, 0],
        [0xfe, 0],
        [0xff, 0],
        [0xff, 0x80],
        [0xff, 0xc0],
    ];
    let magnitude = if value < 0 { !value } else { value } as u64;
    if magnitude < 64 {
        out.push(HEADER[1][0] ^ value as u8);
        return;
    }
    let bits = 64 - magnitude.leading_zeros() as usize;
    let len = bits / 7 + 1;
    let sign = if value < 0 { 0xff } else { 0 };
    let mut buf = [sign; 10];
    buf[2..].copy_from_slice(&value.to_be_bytes());
    let begin = &mut buf[10 - len..];
    begin[0] ^= HEADER[len][0];
    begin[1] ^= HEADER[len][1];
    out.extend_from_slice(begin);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn tensorflow_keys() {
        // Keys TensorFlow 2.21 wrote for `fixed_size_partitioner` slices.
        let slice: TensorSlice = "0,3:0,5".parse().unwrap();
        assert_eq!(hex(&slice_key("emb", &slice)), "00656d620001010280838085");
        let slice: TensorSlice = "3,2:0,5".parse().unwrap();
        assert_eq!(hex(&slice_key("emb", &slice)), "00656d620001010283828085");
        assert_eq!(
            hex(&slice_key("a", &TensorSlice::full(1))),
            "006100010101807f"
        );
    }

    #[test]
    fn signed_numbers_order_and_lengths() {
        let values = [
            i64::MIN,
            -(1 << 40),
            -8193,
            -8192,
            -65,
            -64,
            -1,
            0,
            63,
            64,
            8191,
            8192,
            1 << 40,
            i64::MAX,
        ];
        let encoded: Vec<Vec<u8>> = values
            .iter()
            .map(|&v| {
                let mut out = Vec::new();
                write_signed_num_increasing(&mut out, v);
                out
            })
            .collect();
        assert!(encoded.windows(2).all(|w| w[0] < w[1]), "{encoded:02x?}");
        assert_eq!(encoded[values.len() - 1].len(), 10);
        assert_eq!(encoded[0].len(), 10);
        assert_eq!(encoded[6], [0x7f]);
        assert_eq!(encoded[9], [0xc0, 0x40]);
    }

    #[test]
    fn strings_escape_and_sort() {
        let mut a = Vec::new();
        write_string(&mut a, b"a\0\xff");
        assert_eq!(a, b"a\0\xff\xff\0\0\x01");
        let mut b = Vec::new();
        write_string(&mut b, b"ab");
        assert!(a < b);
    }
}

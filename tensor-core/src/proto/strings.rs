//! String tensors in `tensor_content`, as TensorFlow's `Tensor::AsProtoTensorContent`
//! writes them (`port::EncodeStringList`): every length as a varint, then every string's
//! bytes, in order. `SerializeSparse` writes string values this way.

use crate::error::{Error, Result};

/// The `tensor_content` of `strings`.
pub(crate) fn encode_string_list(strings: &[Vec<u8>]) -> Vec<u8> {
    let total: usize = strings.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total + strings.len());
    for s in strings {
        let mut len = s.len() as u64;
        while len >= 0x80 {
            out.push((len as u8) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
    }
    for s in strings {
        out.extend_from_slice(s);
    }
    out
}

/// The `count` strings of a string tensor's `tensor_content`, or an `Err` unless the
/// content is exactly `count` varint lengths (each below 2^32, as TensorFlow's are) and
/// their bytes.
pub(crate) fn decode_string_list(content: &[u8], count: usize) -> Result<Vec<Vec<u8>>> {
    let malformed = || {
        Error::InvalidProto(format!(
            "a string tensor's tensor_content of {} bytes is not {count} encoded strings",
            content.len()
        ))
    };
    let mut lengths = Vec::with_capacity(count.min(content.len()));
    let mut at = 0;
    for _ in 0..count {
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = *content.get(at).ok_or_else(malformed)?;
            at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift >= 35 {
                return Err(malformed());
            }
        }
        lengths.push(
            usize::try_from(u32::try_from(value).map_err(|_| malformed())?)
                .map_err(|_| malformed())?,
        );
    }
    let mut strings = Vec::with_capacity(lengths.len());
    for len in lengths {
        let end = at
            .checked_add(len)
            .filter(|&e| e <= content.len())
            .ok_or_else(malformed)?;
        strings.push(content[at..end].to_vec());
        at = end;
    }
    if at != content.len() {
        return Err(malformed());
    }
    Ok(strings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_lists_round_trip_as_tensorflow_writes_them() {
        let strings = vec![b"ab".to_vec(), vec![], vec![7; 200]];
        let encoded = encode_string_list(&strings);
        // Lengths first (200 is two varint bytes), then the bytes.
        assert_eq!(&encoded[..5], &[2, 0, 0xc8, 0x01, b'a']);
        assert_eq!(decode_string_list(&encoded, 3).unwrap(), strings);
        assert!(decode_string_list(&encoded, 2).is_err());
        assert!(decode_string_list(&encoded[..encoded.len() - 1], 3).is_err());
        assert!(decode_string_list(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 1).is_err());
    }
}

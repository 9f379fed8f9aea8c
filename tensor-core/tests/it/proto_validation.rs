//! Malformed protos are an `Err` that names the problem; well-formed ones round-trip.

use std::sync::Arc;

use polytensor_core::proto::{DecodeOptions, DimProto, Message, TensorProto, TensorShapeProto};
use polytensor_core::{DataType, Device, Tensor};

fn device() -> Arc<dyn Device> {
    polytensor_cpu::CpuDevice::shared()
}

fn shape(dims: &[i64]) -> Option<TensorShapeProto> {
    Some(TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| DimProto {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    })
}

fn proto(dtype: i32, dims: &[i64]) -> TensorProto {
    TensorProto {
        dtype,
        tensor_shape: shape(dims),
        ..TensorProto::default()
    }
}

/// Decoding fails with a message containing `needle`.
fn rejects(proto: &TensorProto, needle: &str) {
    let err = Tensor::from_proto(proto, &device())
        .expect_err(needle)
        .to_string();
    assert!(err.contains(needle), "expected {needle:?} in {err:?}");
    // The same through the wire form.
    let err = Tensor::decode_proto(proto.encode_to_vec(), &device()).expect_err(needle);
    assert!(err.to_string().contains(needle), "{err}");
}

#[test]
fn malformed_protos_name_the_problem() {
    let float = DataType::Float as i32;
    let mut p = proto(float, &[3]);
    p.tensor_content = vec![0u8; 11].into();
    rejects(
        &p,
        "tensor_content has 11 bytes, but shape [3] of float32 needs 12",
    );

    rejects(&proto(float, &[2, -3]), "dim 1 has size -3");
    rejects(&proto(float, &[1 << 40, 1 << 40]), "overflows");
    rejects(&proto(float, &vec![1; 255]), "rank 255");
    rejects(&proto(0, &[1]), "DT_INVALID");
    rejects(&proto(77, &[1]), "unknown dtype enum value 77");
    rejects(&proto(101, &[1]), "reference dtype");
    rejects(&proto(DataType::Resource as i32, &[1]), "resource");

    // Strings in tensor_content are TensorFlow's encoded list (varint lengths, then the
    // bytes): one that does not hold exactly the tensor's strings is refused.
    let mut p = proto(DataType::String as i32, &[1]);
    p.tensor_content = b"\x05a".to_vec().into();
    rejects(&p, "is not 1 encoded strings");
    p.tensor_content = b"\x01ab".to_vec().into();
    rejects(&p, "is not 1 encoded strings");

    let mut p = proto(float, &[2]);
    p.float_val = vec![1.0, 2.0, 3.0];
    rejects(&p, "float_val holds 3 values for shape [2]");

    let mut p = proto(DataType::Int8 as i32, &[2]);
    p.int_val = vec![1, 200];
    rejects(
        &p,
        "int_val value 1 is 200, outside the dtype's range -128..=127",
    );
    let mut p = proto(DataType::UInt16 as i32, &[1]);
    p.int_val = vec![-1];
    rejects(&p, "outside the dtype's range 0..=65535");
    let mut p = proto(DataType::Int4 as i32, &[1]);
    p.int_val = vec![8];
    rejects(&p, "outside the dtype's range -8..=7");
    let mut p = proto(DataType::Half as i32, &[1]);
    p.half_val = vec![70000];
    rejects(&p, "half_val value 0 is 70000");
    let mut p = proto(DataType::Complex64 as i32, &[1]);
    p.scomplex_val = vec![1.0, 2.0, 3.0, 4.0, 5.0];
    rejects(&p, "scomplex_val holds 2 values for shape [1]");

    // A tiny message describing a huge tensor is refused before any allocation.
    let mut p = proto(float, &[1 << 40]);
    p.float_val = vec![1.0];
    rejects(&p, "DecodeOptions::max_bytes");
    let small = DecodeOptions { max_bytes: 64 };
    let err = Tensor::from_proto_with(&proto(float, &[17]), &device(), &small).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid proto: a float32 tensor of shape [17] needs more than the 64 bytes allowed \
         (DecodeOptions::max_bytes)",
        "one line, no stray backslash or indentation"
    );
    let mut p = proto(DataType::String as i32, &[1 << 40]);
    p.string_val = vec![b"x".to_vec()];
    rejects(&p, "DecodeOptions::max_bytes");
}

/// Protos that both of TensorFlow's decoders accept, read as its C++ `FromProto` reads them.
#[test]
fn what_both_tensorflow_decoders_accept_is_read_as_cpp_reads_it() {
    let read = |p: &TensorProto| {
        let direct = Tensor::from_proto(p, &device()).unwrap();
        let wire = Tensor::decode_proto(p.encode_to_vec(), &device()).unwrap();
        assert_eq!(direct.to_bytes().unwrap(), wire.to_bytes().unwrap());
        assert_eq!(direct.shape(), wire.shape());
        direct
    };
    // An odd number of complex parts: C++ counts parts / 2 values, so the last part is
    // dropped; the values then splat as usual.
    let mut p = proto(DataType::Complex64 as i32, &[3]);
    p.scomplex_val = vec![1.0, 2.0, 3.0];
    let t = read(&p);
    assert_eq!(
        t.to_vec::<num_complex::Complex32>().unwrap(),
        vec![num_complex::Complex32::new(1.0, 2.0); 3]
    );
    let mut p = proto(DataType::Complex128 as i32, &[2]);
    p.dcomplex_val = vec![7.0];
    assert_eq!(
        read(&p).to_vec::<num_complex::Complex64>().unwrap(),
        vec![num_complex::Complex64::new(0.0, 0.0); 2],
        "a lone part is no value: zeros"
    );

    // unknown_rank with dims: TensorShape(proto) and make_ndarray both read the dims.
    let mut p = proto(DataType::Float as i32, &[2, 1]);
    p.tensor_shape.as_mut().unwrap().unknown_rank = true;
    p.float_val = vec![4.0, 5.0];
    let t = read(&p);
    assert_eq!(
        (t.dims(), t.to_vec::<f32>().unwrap()),
        (vec![2, 1], vec![4.0, 5.0])
    );

    // Any non-zero bool byte in tensor_content is true (C++ bool, NumPy's frombuffer).
    let mut p = proto(DataType::Bool as i32, &[3]);
    p.tensor_content = vec![1u8, 2, 0].into();
    assert_eq!(read(&p).to_vec::<bool>().unwrap(), vec![true, true, false]);

    // Sub-byte integers in tensor_content keep their low bits, sign-extended (ml_dtypes);
    // content in one of the valid forms is kept as it is (shared, not rewritten).
    let mut p = proto(DataType::Int4 as i32, &[4]);
    p.tensor_content = vec![0x0f, 0x08, 0x17, 0xf9].into();
    assert_eq!(read(&p).to_bytes().unwrap(), vec![0xff, 0xf8, 0x07, 0xf9]);
    p.tensor_content = vec![0x0f, 0x08, 0x07, 0xf9].into();
    assert_eq!(read(&p).to_bytes().unwrap(), vec![0x0f, 0x08, 0x07, 0xf9]);
    let mut p = proto(DataType::UInt2 as i32, &[2]);
    p.tensor_content = vec![0xff, 0x06].into();
    assert_eq!(read(&p).to_bytes().unwrap(), vec![0x03, 0x02]);
}

#[test]
fn corrupt_wire_bytes_are_errors() {
    let mut p = proto(DataType::Float as i32, &[4]);
    p.tensor_content = vec![0u8; 16].into();
    let good = p.encode_to_vec();
    for cut in 1..good.len() {
        let truncated = &good[..cut];
        match Tensor::decode_proto(truncated.to_vec(), &device()) {
            Ok(t) => assert_eq!(t.dtype(), DataType::Float, "a cut at {cut} kept the dtype"),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    // A length prefix past the end of the input.
    let err = Tensor::decode_proto(vec![0x22, 0xff, 0xff, 0xff, 0x0f], &device()).unwrap_err();
    assert!(
        err.to_string().contains("malformed TensorProto bytes"),
        "{err}"
    );
    // An invalid wire type (7).
    let err = Tensor::decode_proto(vec![0x0f, 0x01], &device()).unwrap_err();
    assert!(
        err.to_string().contains("malformed TensorProto bytes"),
        "{err}"
    );
}

#[test]
fn splats_zeros_and_round_trips() {
    let dev = device();
    let mut p = proto(DataType::Int32 as i32, &[2, 2]);
    p.int_val = vec![5, -6];
    let t = Tensor::from_proto(&p, &dev).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), [5, -6, -6, -6]);
    let zeros = Tensor::from_proto(&proto(DataType::Double as i32, &[3]), &dev).unwrap();
    assert_eq!(zeros.to_vec::<f64>().unwrap(), [0.0; 3]);
    let strings = Tensor::from_proto(&proto(DataType::String as i32, &[2]), &dev).unwrap();
    assert_eq!(strings.to_strings().unwrap(), [b"", b""]);

    let values: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
    let t = Tensor::from_slice(&values, [2, 3, 4], &dev).unwrap();
    for encoded in [
        t.to_proto().unwrap(),
        t.as_proto_field().unwrap(),
        t.as_proto_tensor_content().unwrap(),
    ] {
        let back = Tensor::from_proto(&encoded, &dev).unwrap();
        assert_eq!(back.dims(), [2, 3, 4]);
        assert_eq!(back.to_vec::<f32>().unwrap(), values);
    }
    // A transposed view encodes its logical (row-major) order.
    let tt = t.reshape([6, 4]).unwrap().t().unwrap();
    let back = Tensor::decode_proto(tt.encode_proto().unwrap(), &dev).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), tt.to_vec::<f32>().unwrap());
    // Strings as tensor_content: TensorFlow's encoded list, which decodes back.
    let strings = Tensor::from_strings([b"a".to_vec(), b"bc".to_vec()], [2], &dev).unwrap();
    let content = strings.as_proto_tensor_content().unwrap();
    assert_eq!(content.tensor_content.as_ref(), b"\x01\x02abc");
    let back = Tensor::from_proto(&content, &dev).unwrap();
    assert_eq!(
        back.to_strings().unwrap(),
        vec![b"a".to_vec(), b"bc".to_vec()]
    );
}

/// Bool and sub-byte integer content is validated (and canonicalised) on both decode paths,
/// shared and copied, wherever in a long run the odd byte is.
#[test]
fn content_bytes_are_checked_on_every_path() {
    for (dtype, odd, canonical) in [
        (DataType::Bool, 7u8, 1u8),
        (DataType::Int4, 0x3f, 0xff),
        (DataType::UInt2, 0x06, 0x02),
    ] {
        for at in [0, 4095, 4096, 9999] {
            let mut content = vec![1u8; 10_000];
            content[at] = odd;
            let mut p = proto(dtype as i32, &[10_000]);
            p.tensor_content = content.into();
            let t = Tensor::from_proto(&p, &device()).unwrap();
            let bytes = t.to_bytes().unwrap();
            assert_eq!(bytes[at], canonical, "{dtype} at {at}");
            assert!(bytes.iter().all(|&b| dtype.is_valid_byte(b)), "{dtype}");
        }
    }
}

#[test]
fn aligned_content_is_shared_and_copied_on_write() {
    let dev = device();
    let t = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [4], &dev).unwrap();
    let proto = t.as_proto_tensor_content().unwrap();
    let content = proto.tensor_content.clone();
    let mut shared = Tensor::from_proto(&proto, &dev).unwrap();
    assert!(shared.buffer().is_read_only(), "aligned content is shared");
    assert_eq!(
        shared.view().host_bytes().unwrap().as_ptr(),
        content.as_ptr(),
        "no copy was made"
    );
    shared.as_slice_mut::<f64>().unwrap()[0] = 9.0;
    assert_eq!(shared.to_vec::<f64>().unwrap(), [9.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        content[..8],
        1.0f64.to_le_bytes(),
        "the proto's bytes are untouched"
    );

    // Misaligned content (an odd offset into the input) is copied once.
    let mut wire = vec![0u8];
    wire.extend(t.encode_proto().unwrap());
    let input = bytes::Bytes::from(wire).slice(1..);
    let decoded = Tensor::decode_proto(input, &dev).unwrap();
    assert_eq!(decoded.to_vec::<f64>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn elements_decode_on_the_host_with_the_same_checks() {
    let options = DecodeOptions::default();
    // A splat of the typed field fills the shape, as on a device.
    let mut splat = proto(DataType::Int32.as_i32(), &[2, 2]);
    splat.int_val = vec![1, 7];
    let elements = splat.decode_elements(&options).unwrap();
    assert_eq!(elements.dtype, DataType::Int32);
    assert_eq!(elements.shape.dims()[..], [2, 2]);
    let values: Vec<i32> = elements
        .bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(values, [1, 7, 7, 7]);
    let on_device = Tensor::from_proto(&splat, &device()).unwrap();
    assert_eq!(on_device.to_vec::<i32>().unwrap(), values);

    // Canonical content is shared, not copied; bool bytes other than 0 and 1 are read as
    // TensorFlow reads them.
    let mut content = proto(DataType::Bool.as_i32(), &[3]);
    content.tensor_content = bytes::Bytes::from_static(&[0, 1, 0]);
    let shared = content.decode_elements(&options).unwrap().bytes;
    assert_eq!(shared.as_ptr(), content.tensor_content.as_ptr());
    content.tensor_content = bytes::Bytes::from_static(&[0, 2, 1]);
    assert_eq!(
        content.decode_elements(&options).unwrap().bytes[..],
        [0, 1, 1]
    );

    // The limits and the malformed cases are the same `Err`s as `Tensor::from_proto`'s.
    let mut huge = proto(DataType::Int64.as_i32(), &[1 << 40]);
    huge.int64_val = vec![2];
    let err = huge.decode_elements(&options).unwrap_err().to_string();
    assert!(err.contains("max_bytes"), "{err}");
    let mut short = proto(DataType::Float.as_i32(), &[3]);
    short.tensor_content = bytes::Bytes::from_static(&[0; 8]);
    assert!(short.decode_elements(&options).is_err());
    let mut strings = proto(DataType::String.as_i32(), &[1]);
    strings.string_val = vec![b"a".to_vec()];
    let err = strings.decode_elements(&options).unwrap_err().to_string();
    assert!(err.contains("string"), "{err}");
}

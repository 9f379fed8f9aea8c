//! Any bytes as a serialized `TensorProto`: decoding is an `Ok` or an `Err`, never a panic,
//! and what decodes re-encodes to a proto that decodes to the same tensor.

#![no_main]

use libfuzzer_sys::fuzz_target;
use polytensor_core::proto::DecodeOptions;
use polytensor_core::{DataType, Tensor};

fuzz_target!(|data: &[u8]| {
    let cpu = polytensor_cpu::CpuDevice::shared();
    // A small cap: a few bytes may describe a huge splat, which must be refused, not built.
    let options = DecodeOptions { max_bytes: 1 << 20 };
    let Ok(tensor) = Tensor::decode_proto_with(data.to_vec(), &cpu, &options) else {
        return;
    };
    let _ = tensor.to_string();
    let encoded = tensor.encode_proto().expect("a decoded tensor encodes");
    let again = Tensor::decode_proto_with(encoded, &cpu, &options).expect("re-encoded decodes");
    assert_eq!(again.dtype(), tensor.dtype());
    assert_eq!(again.shape(), tensor.shape());
    if tensor.dtype() == DataType::String {
        assert_eq!(again.to_strings().unwrap(), tensor.to_strings().unwrap());
    } else {
        assert_eq!(again.to_bytes().unwrap(), tensor.to_bytes().unwrap());
    }
});

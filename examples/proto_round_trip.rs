//! TensorFlow's `TensorProto`, the bridge to TensorFlow's files: a tensor encoded as
//! `tf.make_tensor_proto` writes it, decoded as TensorFlow's C++ reads it, and a proto
//! built field by field (`cargo run --example proto_round_trip`). `inspect_proto` prints a
//! `.pb` file.

use polytensor::prelude::*;
use polytensor::proto::{Message, TensorProto};

fn main() -> polytensor::Result<()> {
    let cpu = polytensor::device("cpu:0")?;
    let t = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 0.0], [2, 2], &cpu)?;
    let bytes = t.encode_proto()?;
    let proto =
        TensorProto::decode(bytes.as_slice()).map_err(|e| Error::InvalidProto(e.to_string()))?;
    println!("{} bytes; values in {}", bytes.len(), proto.values_field()?);
    let back = Tensor::decode_proto(bytes, &cpu)?;
    println!("{back}");

    // A splat, as TensorFlow writes `tf.fill`'s constants: one value for every element.
    let splat = TensorProto {
        dtype: DataType::Int32.as_i32(),
        tensor_shape: Some(TensorShape::new(&[2, 3])?.to_proto()),
        int_val: vec![7],
        ..TensorProto::default()
    };
    println!("{}", Tensor::from_proto(&splat, &cpu)?);
    Ok(())
}
